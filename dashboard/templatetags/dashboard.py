"""Template filters of the dashboard."""

from django import template

from server import clock

from ..presenters import duration, split_story

register = template.Library()


@register.filter
def seconds_ago(moment) -> str:
    """``12s``, ``3m 05s``: how long ago, to the second (Django's timesince stops at minutes)."""
    if moment is None:
        return "—"
    return duration(max(0.0, (clock.now() - moment).total_seconds()))


@register.filter
def split_words(event) -> str:
    """A split event's message, its records, items and workers told apart (presenters.split_story)."""
    fields = event if isinstance(event, dict) else vars(event)  # item history entries are dicts, events models
    message = fields.get("message", "")
    return split_story(message, fields.get("worker", "")) if fields.get("kind") == "split" else message
