"""Team secrets encrypted at rest: the column is renamed and every stored value encrypted in place
(unapplied: decrypted, then renamed back). The keys are the settings' at the time it runs."""

from typing import Any

from django.db import migrations

from controlplane.teams.secrets import secret_decrypt, secret_encrypt


def encrypt(apps: Any, schema_editor: Any) -> None:
    TeamSecret = apps.get_model("teams", "TeamSecret")
    for secret in TeamSecret.objects.only("id", "value_encrypted").order_by("id"):
        TeamSecret.objects.filter(id=secret.id).update(value_encrypted=secret_encrypt(value=secret.value_encrypted))


def decrypt(apps: Any, schema_editor: Any) -> None:
    # A secret no key opens raises SecretUndecryptable, naming it: the migration is rolled back whole.
    TeamSecret = apps.get_model("teams", "TeamSecret")
    for secret in TeamSecret.objects.only("id", "name", "value_encrypted").order_by("id"):
        value = secret_decrypt(name=secret.name, token=secret.value_encrypted)
        TeamSecret.objects.filter(id=secret.id).update(value_encrypted=value)


class Migration(migrations.Migration):
    dependencies = [("teams", "0003_team_secret")]

    operations = [
        migrations.RenameField(model_name="teamsecret", old_name="value", new_name="value_encrypted"),
        migrations.RunPython(encrypt, decrypt, elidable=False),
    ]
