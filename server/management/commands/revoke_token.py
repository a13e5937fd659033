from django.core.management.base import BaseCommand, CommandError

from server.errors import ShardlineError
from server.services import accounts


class Command(BaseCommand):
    help = "Revoke an API token by its id, its whole key, or the start of its key (up to the 10 characters the admin lists)."

    def add_arguments(self, parser):
        parser.add_argument("token", help="token id, whole key, or a prefix of the key that names one live token")

    def handle(self, token, **options):
        try:
            revoked = accounts.revoke_token(token)
        except ShardlineError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"revoked {revoked.prefix}… of {revoked.user.get_username()}")
