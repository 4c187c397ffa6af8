"""The generate recipe: responses of several models to an eval set's prompts, for blind battles."""
