from django.core.management.base import BaseCommand

from server import embedded_pg


class Command(BaseCommand):
    help = "Start, stop or show the embedded Postgres (used when DATABASE_URL is unset)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, action, **options):
        if action == "start":
            socket_dir, _port = embedded_pg.ensure_running()
            self.stdout.write(f"running: socket {socket_dir}, database {embedded_pg.DATABASE_NAME}")
        elif action == "stop":
            self.stdout.write("stopped" if embedded_pg.stop() else "not running")
        else:
            self.stdout.write(f"{'running' if embedded_pg.is_running() else 'stopped'} ({embedded_pg.data_dir()})")
