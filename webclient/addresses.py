"""Which addresses a request may reach, resolving a host to them, and the TLS settings.

The leaf of the web client: :mod:`.client` (the redirects it follows itself, the failures it
reports) and :mod:`.transport` (the connection made to exactly the address checked) both use
it, and it uses neither. An address is public unless it is private, loopback, link-local,
reserved, multicast or unspecified, or an IPv6 form that carries such an IPv4 address (NAT64,
IPv4-compatible, IPv4-translated, 6to4, Teredo): see :func:`is_public_address`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from functools import cache

from kgot.errors import ToolFailure, TransientNetworkError


@cache
def ssl_context() -> ssl.SSLContext:
    """The TLS settings of every request (building one loads the CA bundle: ~20 ms)."""
    import httpx

    return httpx.create_ssl_context()


async def public_addresses(host: str, port: int, *, timeout: float | None = None) -> list[str]:
    """The addresses ``host`` resolves to, all of them public.

    Raises:
        ToolFailure: ``input`` when any address is not public, ``not_found`` when the name
            does not resolve; a :class:`TransientNetworkError` for a temporary DNS failure.
    """
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        _refuse_if_private(host, literal)
        return [host]
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout
        )
    except TimeoutError:
        raise TransientNetworkError(
            f"looking up the host {host!r} took too long (no network, or a slow name server?)"
        ) from None
    except socket.gaierror as error:
        raise resolution_failure(host, error) from None
    except UnicodeError:
        raise _unresolvable(host) from None
    addresses: list[str] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        _refuse_if_private(host, ipaddress.ip_address(text))
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise _unresolvable(host)
    return addresses


# IPv6 forms that carry an IPv4 address: a connection to one reaches that IPv4 address (through
# a translator or a tunnel, or as IPv4 itself), so the IPv4 address is what must be public.
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: IPv4 in the last 32 bits
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: the site picks the layout
_NAT64_LOCAL_PREFIX_LENGTHS = (48, 56, 64, 96)  # RFC 6052 layouts possible inside a /48
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d (also :: and ::1)
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 ::ffff:0:a.b.c.d


def is_public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether a connection to ``address`` reaches the public internet only.

    An IPv6 address that embeds an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-translated,
    NAT64, 6to4, Teredo) is judged by the IPv4 address(es) it carries; Python's ``is_global``
    calls most of those forms global whatever they carry. Site-local ``fec0::/10`` (deprecated,
    still routed inside some sites) is never public.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return False
        embedded = embedded_ipv4(address)
        if embedded:
            return all(is_public_address(inner) for inner in embedded)
    return address.is_global and not address.is_multicast


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses ``address`` carries (empty when it is not such a form).

    Teredo gives two (its server and its client); the local-use NAT64 prefix one per layout the
    site may have chosen, since the address alone does not say which.
    """
    value = int(address)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _IPV4_TRANSLATED or address in _IPV4_COMPATIBLE or address in _NAT64_WELL_KNOWN:
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)]
    if address in _NAT64_LOCAL:
        return [_rfc6052_ipv4(value, length) for length in _NAT64_LOCAL_PREFIX_LENGTHS]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def _rfc6052_ipv4(value: int, prefix_length: int) -> ipaddress.IPv4Address:
    """The IPv4 address after a NAT64 prefix of ``prefix_length`` bits (RFC 6052 section 2.2:
    bits 64-71 are always zero and skipped, so the address may straddle them)."""
    bits = f"{value:0128b}"
    without_u_octet = bits[:64] + bits[72:]
    start = prefix_length if prefix_length <= 64 else prefix_length - 8
    return ipaddress.IPv4Address(int(without_u_octet[start : start + 32], 2))


def _refuse_if_private(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    if is_public_address(address):
        return
    carried = []
    if isinstance(address, ipaddress.IPv6Address) and not (
        address.is_loopback or address.is_unspecified  # ::1 and :: carry no meaningful IPv4
    ):
        carried = [a for a in dict.fromkeys(embedded_ipv4(address)) if not is_public_address(a)]
    shown = f"{address}, which carries {', '.join(map(str, carried))}" if carried else str(address)
    raise ToolFailure(
        f"{host} points at a non-public address ({shown}); kgot only fetches public "
        "web pages (a user can allow private addresses with tools.allow_private_urls)",
        kind="input",
        source_ref=host,
    )


def resolution_failure(host: str, error: socket.gaierror) -> ToolFailure:
    """What a failed name look-up means, as far as ``getaddrinfo``'s error code tells.

    Only "no such name" (``EAI_NONAME``) and "no address for the name" (``EAI_NODATA``) are the
    address's fault. ``EAI_AGAIN`` means the name server did not answer — no network, or a
    temporary DNS failure — and is worth a retry; any other code is a resolver failure.
    """
    code = error.errno
    if code in _NO_SUCH_NAME:
        return _unresolvable(host)
    if code == socket.EAI_AGAIN:
        return TransientNetworkError(
            f"the host name {host!r} could not be resolved: no name server answered (no "
            "network? or a temporary DNS failure)",
            source_ref=host,
        )
    reason = error.strerror or f"getaddrinfo error {code}"
    return ToolFailure(
        f"the host name {host!r} could not be resolved ({reason}): the name look-up itself "
        "failed, not the address — no network? Try again later or use another tool",
        kind="network",
        source_ref=host,
    )


# "No such name" and "the name has no address" (EAI_NODATA exists on glibc only).
_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


def _unresolvable(host: str) -> ToolFailure:
    return ToolFailure(
        f"cannot resolve the host {host!r}: the name server knows no address for it; check "
        "the spelling of the address or search for the page instead",
        kind="not_found",
        source_ref=host,
    )
