from django.core.management.base import BaseCommand, CommandError

from server.errors import ShardlineError
from server.models import Role
from server.services import accounts


class Command(BaseCommand):
    help = "Create an API token for USERNAME (creating the user with ROLE if needed); prints the key alone on stdout."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=Role.values, default=Role.WORKER)
        parser.add_argument("--name", default="", help="a label to recognise the token by")
        parser.add_argument("--expires-in-days", type=int, default=None)
        parser.add_argument(
            "--jobs",
            action="append",
            default=[],
            metavar="PATTERN",
            help="limit the token to jobs whose name matches PATTERN (* any characters, ? one); repeat for more; "
            "without it the token reaches every job",
        )

    def handle(self, username, role, name, expires_in_days, jobs, **options):
        user, created = accounts.ensure_user(username, role)
        if created:
            self.stderr.write(f"created user {username!r} with role {role}")
        elif accounts.role_of_user(user) is None:
            accounts.set_role(user, role)
        try:
            _token, key = accounts.create_token(user, role, name=name, expires_in_days=expires_in_days, jobs=jobs)
        except ShardlineError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(key)
