"""manage.py rotate_team_secrets: re-encrypt every team secret under the first of BARREL_SECRETS_KEYS.

Rotating a key: put a new key first in BARREL_SECRETS_KEYS, keeping the old one after it, restart,
run this, then drop the old key.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from controlplane.teams.secrets import secrets_rotate


class Command(BaseCommand):
    help = "Re-encrypt every team secret with the first key of BARREL_SECRETS_KEYS."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated, unreadable = secrets_rotate()
        self.stdout.write(f"Re-encrypted {rotated} team secret{'' if rotated == 1 else 's'} with the first key.")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} team secret(s) left as they were, no key in BARREL_SECRETS_KEYS decrypts them: "
                f"{', '.join(unreadable)}. Add the key they were encrypted with, or set them again."
            )
