"""Template filters of the dashboard."""

from django import template
from django.utils import timezone

from ..presenters import duration

register = template.Library()


@register.filter
def seconds_ago(moment) -> str:
    """``12s``, ``3m 05s``: how long ago, to the second (Django's timesince stops at minutes)."""
    if moment is None:
        return "—"
    return duration(max(0.0, (timezone.now() - moment).total_seconds()))
