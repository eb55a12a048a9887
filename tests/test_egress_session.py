"""The session side of egress without a network: which sessions get a ProxySession
(egress.mode, bindings from a real vault), and substitution at every split."""

from __future__ import annotations

import base64

import pytest
from urllib.parse import unquote_to_bytes
from cryptography import x509
from hypothesis import example, given, strategies as st

from paddedcell import config
from paddedcell.egress.binding import Binding
from paddedcell.egress.placeholders import PlaceholderError, make_placeholder, same_shape
from paddedcell.egress.session import CA_BUNDLE_VARIABLES, ca_environment, session_for
from paddedcell.egress.substitute import Destination, Grant, Refused, Substituter, Undecodable
from paddedcell.vault import agent_values_and_bindings, bind_secret, init_admin, set_secret

PW = "egress session test admin pw"
FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
REAL = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"


@pytest.fixture
def vault(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o700)
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    init_admin(PW, settings)
    set_secret("a1", str(ws), "db", "an unbound value", PW, settings)
    return settings, str(ws)


def load_session(agent_id, workspace, settings):
    """What secretflow.prepare does: one store read, then session_for."""
    values, bindings = ([], {}) if agent_id is None else agent_values_and_bindings(
        agent_id, workspace, settings=settings)
    return session_for(agent_id, settings, values=values, bindings=bindings)


def _with_mode(settings, mode: str):
    return config.load({"PADDEDCELL_HOME": str(settings.home)}, {**FAST_KDF, "egress.mode": mode})


def test_auto_is_on_only_for_agents_with_a_bound_secret(vault):
    settings, ws = vault
    assert load_session("a1", ws, settings) is None  # nothing bound yet
    assert load_session("a1", ws, _with_mode(settings, "always")) is not None
    set_secret("a1", ws, "gh", REAL, PW, settings, binding=Binding(("api.github.com",)))
    session = load_session("a1", ws, settings)
    assert session is not None and session.is_bound("gh") and not session.is_bound("db")
    assert load_session("a1", ws, _with_mode(settings, "off")) is None
    assert load_session(None, None, settings) is None


def test_a_session_placeholder_is_stable_fresh_and_masked(vault):
    settings, ws = vault
    set_secret("a1", ws, "gh", REAL, PW, settings)
    bind_secret("a1", ws, "gh", Binding(("api.github.com", "github.com")), PW, settings)
    one, two = load_session("a1", ws, settings), load_session("a1", ws, settings)
    first = one.issue("gh", REAL)
    assert one.issue("gh", REAL) == first  # the same for the rest of the session
    assert two.issue("gh", REAL) != first  # fresh per session
    assert same_shape(first, REAL) and first not in (REAL, "an unbound value")
    mask = one.response_filter()
    out = mask.feed(f"{first} {REAL} an unbound value".encode()) + mask.flush()
    assert out == b"###### ###### ######"
    # No name constraints: with a placeholder held, unbound hosts are terminated too.
    with pytest.raises(x509.ExtensionNotFound):
        one.ca.certificate.extensions.get_extension_for_class(x509.NameConstraints)


def test_ca_environment_names_every_client_variable():
    env = ca_environment("/tmp/bundle.pem")
    assert set(env) == {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                        "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "DENO_CERT"}
    assert set(env.values()) == {"/tmp/bundle.pem"} and len(CA_BUNDLE_VARIABLES) == 7


def test_short_values_cannot_be_placeheld():
    with pytest.raises(PlaceholderError, match="at least 8"):
        make_placeholder("ghp_abc-def")


def _grant(inject: str = "body", plain: bool = False) -> Grant:
    placeholder = make_placeholder(REAL)
    return Grant("gh", placeholder.encode(), REAL.encode(),
                 Binding(("api.github.com",), inject, plain))


def _streamed(stream, body: bytes, cuts: list[int]) -> bytes:
    """``body`` through a body stream, cut at ``cuts``."""
    out, start = b"", 0
    for cut in sorted(set(cuts)) + [len(body)]:
        for piece in stream.feed(body[start:cut]):
            out += piece
        start = max(start, cut)
    return out + b"".join(stream.finish())


@given(st.binary(max_size=300), st.binary(max_size=300), st.lists(st.integers(1, 700)))
@example(b"", b"", [1])
def test_a_streamed_body_is_substituted_at_every_split(before, after, cuts):
    grant = _grant()
    body = before + grant.placeholder + after + grant.placeholder
    out = _streamed(Substituter([grant], Destination("api.github.com", 443, "https")).body(),
                    body, cuts)
    assert out == body.replace(grant.placeholder, grant.value)


@given(st.integers(0, 60))
def test_a_streamed_body_toward_another_host_is_refused_at_any_split(cut):
    grant = _grant()
    body = b"x=" + grant.placeholder
    stream = Substituter([grant], Destination("evil.example", 443, "https")).body()
    with pytest.raises(Refused, match="gh is bound to api.github.com"):
        for part in (body[:cut], body[cut:]):
            for piece in stream.feed(part):
                assert grant.value not in piece
        stream.finish()


def test_headers_target_and_basic():
    grant = _grant("header")
    sub = Substituter([grant], Destination("api.github.com", 443, "https"))
    p, v = grant.placeholder, grant.value
    basic = b"Basic " + base64.b64encode(b"user:" + p)
    headers = sub.headers([(b"authorization", basic), (b"x-key", b"k=" + p),
                           (b"authorization", b"Basic not base64!")])
    assert headers[0] == (b"authorization", b"Basic " + base64.b64encode(b"user:" + v))
    assert headers[1] == (b"x-key", b"k=" + v)
    assert headers[2] == (b"authorization", b"Basic not base64!")
    assert sub.target(b"/q?token=" + p) == b"/q?token=" + v
    assert sub.substituted == {"gh"}
    with pytest.raises(Refused, match="not in the body"):
        sub.body().feed(p)
    plain = Substituter([grant], Destination("api.github.com", 80, "http"))
    with pytest.raises(Refused, match="over https only"):
        plain.headers([(b"x", p)])
    other_port = Substituter([grant], Destination("api.github.com", 8443, "https"))
    assert other_port.headers([(b"x", b"nothing here")]) == [(b"x", b"nothing here")]


def test_the_bundle_file_is_system_trust_then_the_session_ca(tmp_path, vault):
    settings, ws = vault
    set_secret("a1", ws, "gh", REAL, PW, settings, binding=Binding(("api.github.com",)))
    session = load_session("a1", ws, settings)
    path = tmp_path / "s.ca.pem"
    session.write_bundle(str(path))
    data = path.read_bytes()
    assert data.endswith(session.ca.certificate_pem)
    assert data.count(b"BEGIN CERTIFICATE") > 10  # the system's roots first
    assert path.stat().st_mode & 0o777 == 0o644
    with pytest.raises(FileExistsError):  # a new file each session, never a rewrite
        session.write_bundle(str(path))


PUNCTUATED = "sk-" + "a/b+c=d:e f0123456789XYZ"


@given(st.lists(st.booleans(), min_size=len(PUNCTUATED), max_size=len(PUNCTUATED)),
       st.booleans(), st.lists(st.integers(1, 200)))
def test_a_percent_encoded_placeholder_is_swapped_unit_by_unit_at_every_split(which, lower,
                                                                             cuts):
    """Any mix of raw and %XX units (either hex case, ``+`` for the space in a form):
    the value goes out written the same way, same length; toward another host: refused."""
    placeholder = make_placeholder(PUNCTUATED)
    grant = Grant("gh", placeholder.encode(), PUNCTUATED.encode(),
                  Binding(("api.github.com",), "body"))

    def written(text: str) -> bytes:
        units = []
        for char, encode in zip(text, which):
            if char == " ":
                units.append("+" if encode else "%20")
            elif encode or char in "/+=:":
                units.append(("%%%02x" if lower else "%%%02X") % ord(char))
            else:
                units.append(char)
        return "".join(units).encode()

    body = b"a=1&t=" + written(placeholder) + b"&b=2"
    out = _streamed(Substituter([grant], Destination("api.github.com", 443, "https")).body(),
                    body, cuts)
    expected = b"a=1&t=" + written(PUNCTUATED) + b"&b=2"
    # The same units (a %XX whose placeholder digits had no letter may change hex case).
    assert len(out) == len(expected)
    assert [c == 37 for c in out] == [c == 37 for c in expected]
    assert unquote_to_bytes(out) == unquote_to_bytes(expected)
    with pytest.raises(Refused, match="gh is bound to api.github.com"):
        Substituter([grant], Destination("evil.example", 443, "https")).target(b"/?" + body)


def test_an_encoded_body_is_refused_past_its_limit_and_kept_when_clean():
    import gzip

    grant = _grant()
    sub = Substituter([grant], Destination("api.github.com", 443, "https"))
    bomb = gzip.compress(b"\0" * 100_000)
    with pytest.raises(Undecodable, match="more than 1000 bytes"):
        sub.encoded_body(b"gzip", 1000).rewrite(bomb)
    clean = gzip.compress(b"nothing to see")
    assert sub.encoded_body(b"gzip", 1000).rewrite(clean) == clean
    swapped = sub.encoded_body(b"identity, gzip", 1000).rewrite(
        gzip.compress(b"t=" + grant.placeholder))
    assert gzip.decompress(swapped) == b"t=" + grant.value
    with pytest.raises(Undecodable, match="Content-Encoding: zstd"):
        sub.encoded_body(b"gzip, zstd", 1000)
