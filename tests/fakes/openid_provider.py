"""A fake OpenID Connect provider speaking the protocol over HTTP (Starlette on uvicorn, like
the fake model servers): discovery, ``/authorize`` (consents at once and sends the browser
back with a code and the state), ``/token`` (checks the client's secret, the code, its
redirect URI and the PKCE verifier against the S256 challenge), ``/jwks`` (an RSA key made at
start) and ID tokens signed RS256.

``who`` is the person who logs in next (their e-mail address); the switches of
:class:`Faults` make the next ID tokens wrong in one way each.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field, fields
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .server import ServerThread

CLIENT_ID = "chatplatform-test-client"
CLIENT_SECRET = "fake-op-client-secret-5521"


@dataclass
class Faults:
    """What the next ID tokens get wrong (all off: a valid token)."""

    wrong_issuer: bool = False
    wrong_audience: bool = False
    expired: bool = False
    wrong_nonce: bool = False
    bad_signature: bool = False
    unverified_email: bool = False
    no_email_verified: bool = False


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    code_challenge: str
    nonce: str
    email: str


@dataclass
class TokenRequest:
    form: dict[str, str]
    authorization: str
    status: int


@dataclass
class FakeOpenIDProvider:
    who: str = "ada@acme.example"
    faults: Faults = field(default_factory=Faults)
    token_requests: list[TokenRequest] = field(default_factory=list)
    discovery_requests: int = 0

    def __post_init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "fake-op-1", "use": "sig"})
        self.other_key = RSAKey.generate_key(2048, parameters={"kid": "fake-op-1"})
        self._grants: dict[str, Grant] = {}
        self._thread: ServerThread | None = None

    # --- control (test thread) -------------------------------------------------------------

    def start(self) -> Self:
        self._thread = ServerThread(self.app()).start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    @property
    def url(self) -> str:
        assert self._thread is not None, "fake provider not started"
        return self._thread.url

    @property
    def issuer(self) -> str:
        return self.url

    def reset(self) -> None:
        self.who = "ada@acme.example"
        for switch in fields(Faults):
            setattr(self.faults, switch.name, False)
        self.token_requests.clear()
        self.discovery_requests = 0
        self._grants.clear()

    # --- the protocol ----------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
                Route("/jwks", self._jwks),
            ]
        )

    async def _discovery(self, request: Request) -> Response:
        self.discovery_requests += 1
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "jwks_uri": f"{self.url}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                ],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    async def _authorize(self, request: Request) -> Response:
        params = request.query_params
        problems = [
            name
            for name, ok in (
                ("response_type", params.get("response_type") == "code"),
                ("scope", "openid" in (params.get("scope") or "").split()),
                ("client_id", params.get("client_id") == CLIENT_ID),
                ("code_challenge_method", params.get("code_challenge_method") == "S256"),
                ("code_challenge", bool(params.get("code_challenge"))),
                ("redirect_uri", bool(params.get("redirect_uri"))),
                ("state", bool(params.get("state"))),
                ("nonce", bool(params.get("nonce"))),
            )
            if not ok
        ]
        if problems:
            return JSONResponse({"error": "invalid_request", "bad": problems}, status_code=400)
        code = secrets.token_urlsafe(24)
        self._grants[code] = Grant(
            client_id=params["client_id"],
            redirect_uri=params["redirect_uri"],
            code_challenge=params["code_challenge"],
            nonce=params["nonce"],
            email=self.who,
        )
        query = urlencode({"code": code, "state": params["state"]})
        return RedirectResponse(f"{params['redirect_uri']}?{query}", status_code=302)

    def _client_authenticated(self, request: Request, form: dict[str, str]) -> bool:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            decoded = base64.b64decode(header[6:]).decode()
            client_id, _, secret = decoded.partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        return client_id == CLIENT_ID and secret == CLIENT_SECRET

    async def _token(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode()))
        record = TokenRequest(form, request.headers.get("authorization", ""), 200)
        self.token_requests.append(record)

        def error(status: int, name: str) -> Response:
            record.status = status
            return JSONResponse({"error": name}, status_code=status)

        if not self._client_authenticated(request, form):
            return error(401, "invalid_client")
        if form.get("grant_type") != "authorization_code":
            return error(400, "unsupported_grant_type")
        grant = self._grants.pop(form.get("code", ""), None)  # a code works once
        if grant is None or grant.redirect_uri != form.get("redirect_uri"):
            return error(400, "invalid_grant")
        verifier = form.get("code_verifier", "")
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        if not verifier or challenge != grant.code_challenge:
            return error(400, "invalid_grant")
        return JSONResponse(
            {
                "access_token": secrets.token_urlsafe(24),
                "token_type": "Bearer",
                "expires_in": 300,
                "id_token": self.id_token(grant),
            }
        )

    def id_token(self, grant: Grant) -> str:
        now = int(time.time())
        faults = self.faults
        claims: dict[str, Any] = {
            "iss": "https://elsewhere.example" if faults.wrong_issuer else self.issuer,
            "sub": hashlib.sha256(grant.email.encode()).hexdigest()[:16],
            "aud": "someone-else" if faults.wrong_audience else grant.client_id,
            "iat": now - (7200 if faults.expired else 0),
            "exp": now - 3600 if faults.expired else now + 300,
            "nonce": "not-the-nonce" if faults.wrong_nonce else grant.nonce,
            "email": grant.email,
            "email_verified": not faults.unverified_email,
        }
        if faults.no_email_verified:
            del claims["email_verified"]
        key = self.other_key if faults.bad_signature else self.key
        return jwt.encode({"alg": "RS256", "kid": "fake-op-1"}, claims, key)
