"""How a process reaches the server: its pool of connections, made from what the environment says.

requests read the proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``,
``ALL_PROXY``, ``NO_PROXY``, any case) and ``REQUESTS_CA_BUNDLE`` /
``CURL_CA_BUNDLE`` on every request; the SDK's transport (worker_sdk.transport)
reads them once per process, here, and honours them as requests did: a
proxy's ``user:password@`` becomes its Proxy-Authorization, ``NO_PROXY`` may
name networks (``10.0.0.0/8``), a CA bundle may be a file or a directory of
hashed certificates, a ``socks5://`` proxy needs PySocks. What cannot work
(a URL without a host, a scheme other than http and https, a CA bundle that
is not there) raises ``ConfigurationError`` at once, before any retrying.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from urllib.parse import unquote, urlsplit

import urllib3

from .errors import ConfigurationError

# Connections kept per process: its training thread, its take ahead and its
# heartbeat may each hold one at a time (requests kept 10 too).
POOL_SIZE = 10


def check_url(url: str) -> None:
    """Raises ConfigurationError unless ``url`` is http(s)://host[:port][/path]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"the server's URL {url!r} must be http://HOST[:PORT] or https://HOST[:PORT] "
            "(SHARDLINE_URL, or url=...), e.g. http://shardline.internal:8000"
        )
    try:
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as exc:
        raise ConfigurationError(f"the server's URL {url!r}: {exc}") from None


def pool_for(url: str) -> urllib3.PoolManager:
    """A pool of connections to ``url``'s server, through the proxy the environment names for it, if any."""
    options = {"num_pools": 2, "maxsize": POOL_SIZE, "retries": False, **_trust()}
    proxy = proxy_for(url)
    if proxy is None:
        return urllib3.PoolManager(**options)
    parsed = urllib3.util.parse_url(proxy)
    shown = parsed._replace(auth=None).url  # never a password in a message
    if parsed.scheme and parsed.scheme.startswith("socks"):
        try:
            from urllib3.contrib.socks import SOCKSProxyManager
        except ImportError:
            raise ConfigurationError(f"the proxy {shown} is a SOCKS proxy: pip install pysocks") from None
        return SOCKSProxyManager(proxy, **options)  # it reads the credentials from the URL itself
    if parsed.scheme not in ("http", "https"):
        raise ConfigurationError(f"the proxy {shown} is neither http://, https:// nor socks")
    if parsed.auth:
        # ProxyManager does not read credentials from the URL: requests sent them as Proxy-Authorization.
        options["proxy_headers"] = urllib3.make_headers(proxy_basic_auth=unquote(parsed.auth))
    return urllib3.ProxyManager(shown, **options)


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url``, None when there is none or NO_PROXY covers it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or _bypassed(parts.hostname or "", proxies.get("no", "")) or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether an IP address ``host`` lies in a network, or is an address, that NO_PROXY names (urllib reads names only)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    for entry in no_proxy.replace(" ", "").split(","):
        try:
            if address in ipaddress.ip_network(entry.strip("[]"), strict=False):
                return True
        except ValueError:
            continue  # a name, or a name with a port: urllib's check
    return False


def _trust() -> dict:
    """The CA certificates for https servers: REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE, else certifi's, else the system's."""
    named = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if named:
        if os.path.isdir(named):
            return {"ca_cert_dir": named}
        if os.path.isfile(named):
            return {"ca_certs": named}
        raise ConfigurationError(f"the CA bundle {named!r} (REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE) is not there")
    try:
        import certifi
    except ImportError:
        return {}  # the system's store (urllib3's default)
    return {"ca_certs": certifi.where()}
