from django.apps import AppConfig


class ShardlineConfig(AppConfig):
    name = "server"
    label = "shardline"
    verbose_name = "Shardline dispatch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the database checks)
