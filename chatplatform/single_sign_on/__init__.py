"""Single sign-on with OpenID Connect, configured per tenant by the operator.

The model is :class:`chatplatform.models.IdentityProvider` (its admin:
``console/identity_providers.py``); the outbound rules and client ``provider_endpoints``;
the protocol ``protocol`` (authlib); who logs in and joins ``services``; the pages ``views``
(``/accounts/sso/``).
"""
