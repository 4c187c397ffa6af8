"""The MLflow tracking REST subset: Barrel projects and runs seen as MLflow experiments and runs."""
