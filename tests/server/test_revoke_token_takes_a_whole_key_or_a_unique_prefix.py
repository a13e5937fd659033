import pytest
from django.core.management import CommandError, call_command

from server.models import ApiToken
from server.services import accounts

pytestmark = pytest.mark.django_db


def new_key(name="revoker"):
    user, _ = accounts.ensure_user(name, "worker")
    token, key = accounts.create_token(user, "worker")
    return token, key


def revoked(token) -> bool:
    return ApiToken.objects.get(pk=token.pk).revoked_at is not None


def shortest_unique_start(key: str) -> str:
    """The shortest start of ``key`` (8 characters at least) that no other live key shares."""
    for length in range(8, 11):
        if ApiToken.objects.filter(prefix__startswith=key[:length], revoked_at__isnull=True).count() == 1:
            return key[:length]
    return key


@pytest.mark.parametrize("how", ["whole key", "first 10", "shortest unique start", "id"])
def test_each_way_of_naming_a_token_revokes_it(how, capsys):
    token, key = new_key()
    others = [new_key(f"other-{i}")[0] for i in range(2)]
    reference = {
        "whole key": key,
        "first 10": key[:10],
        "shortest unique start": shortest_unique_start(key),
        "id": str(token.pk),
    }[how]
    call_command("revoke_token", reference)
    assert revoked(token) and not any(revoked(other) for other in others)
    assert key not in capsys.readouterr().out  # the key is never echoed


def test_an_ambiguous_or_short_prefix_or_a_partial_key_changes_nothing():
    token, key = new_key()
    user = token.user
    twins = [
        ApiToken.objects.create(user=user, role="worker", prefix=f"shl_abcd{n}", key_hash=f"{n}" * 32) for n in (12, 34)
    ]
    with pytest.raises(CommandError, match="start of several live keys"):
        call_command("revoke_token", "shl_abcd")
    with pytest.raises(CommandError, match="at least 8 characters"):
        call_command("revoke_token", accounts.KEY_PREFIX)
    for partial_or_mistyped in (key[:20], key[:-1] + ("A" if key[-1] != "A" else "B")):
        with pytest.raises(CommandError, match="not a whole live key"):
            call_command("revoke_token", partial_or_mistyped)
    with pytest.raises(CommandError, match="no live token"):
        call_command("revoke_token", "shl_zzzzzzzz-no-such-key")
    assert not any(revoked(t) for t in [token, *twins])
