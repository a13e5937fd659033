from django.core.management.base import BaseCommand, CommandError

from server.errors import ShardlineError
from server.services import accounts


class Command(BaseCommand):
    help = "Revoke an API token by its id or its prefix (the first 10 characters of the key)."

    def add_arguments(self, parser):
        parser.add_argument("token", help="token id or key prefix, as the admin lists them")

    def handle(self, token, **options):
        try:
            revoked = accounts.revoke_token(token)
        except ShardlineError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"revoked {revoked.prefix}… of {revoked.user.get_username()}")
