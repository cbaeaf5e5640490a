"""What the composer and the message list ask while the user writes and reads: whether a
draft fits the next turn whole (JSON), and the versions of an edited or regenerated message
(JSON). Both answer the conversation's participants only: the same 404 otherwise."""

from __future__ import annotations

from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from chatplatform.core.context.budget import PolicyError
from chatplatform.policies import policy_for
from chats.assembly.fit import message_fit
from chats.selectors import message_versions
from chats.services import max_message_chars
from chats.ui.views._common import conversation_or_404, tenant_member_required, tenant_of


@require_POST
@tenant_member_required
def message_fit_view(request: HttpRequest, conversation_id: int) -> JsonResponse:
    """``text`` (form field): the draft. ``{"fit": {tokens, room, kept, fits, ...}}``;
    ``{"fit": null}`` when the policy cannot assemble a turn (the turn will say why); 400 with
    ``error`` for a draft longer than the conversation accepts (it will not be sent)."""
    conversation = conversation_or_404(request, conversation_id)
    text = request.POST.get("text", "")
    limit = max_message_chars(policy_for(conversation))
    if len(text) > limit:
        return JsonResponse(
            {"error": f"The message has {len(text)} characters; the limit is {limit}."},
            status=400,
        )
    try:
        fit = message_fit(conversation, text=text, author=request.user)
    except PolicyError:
        return JsonResponse({"fit": None})
    return JsonResponse({"fit": fit.as_dict()})


@require_GET
@tenant_member_required
def message_versions_view(
    request: HttpRequest, conversation_id: int, message_id: int
) -> JsonResponse:
    """``{"versions": [{number, content, status, written_at, current, replaced,
    replaced_at}]}``, the first written first; 404 alike for a missing message and one the
    user may not see."""
    versions = message_versions(
        request.user, conversation_id, message_id, tenant_id=tenant_of(request).pk
    )
    if versions is None:
        raise Http404("No such message.")
    return JsonResponse({"versions": [v.as_dict() for v in versions]})
