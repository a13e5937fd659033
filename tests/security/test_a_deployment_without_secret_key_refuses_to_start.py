"""SECRET_KEY is required whenever DATABASE_URL is set (a deployment), unless DEBUG.

The generated key file (.shardline/secret_key) is kept for the single-machine
set-up on the embedded database (`make run`, no configuration), and for DEBUG.
"""

from .test_cookies_are_secure_only_when_served_over_https import load_settings


def test_no_secret_key_with_database_url_is_a_clear_error(tmp_path):
    result = load_settings(tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is not set: it is required when DATABASE_URL is set" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_debug_may_use_the_generated_key(tmp_path):
    result = load_settings(tmp_path, DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_a_given_secret_key_is_used(tmp_path):
    result = load_settings(tmp_path, SECRET_KEY="given-" + "k" * 50)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "secret_key").exists()
