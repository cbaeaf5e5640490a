"""The memories page: how the user wants to be answered (their standing instructions and
preferences, each with its kind), then their facts, in their current tenant, with add (of
any kind), edit, share or keep private, delete and history. Another user's memory answers
404 exactly like a missing one."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from chatplatform.core.memory.kinds import STANDING_KINDS, memory_kind_choices, memory_kind_for
from chats.ui.forms import FactEditForm, FactForm, FactShareForm
from chats.ui.views._common import int_param, page, tenant_member_required, tenant_of
from memory.models import FactSource, UserFact
from memory.selectors import (
    MAX_PAGE_SIZE,
    current_facts,
    fact_get,
    fact_history,
    facts_list,
    kinds_sent_in,
)
from memory.services import (
    FactRejected,
    fact_delete,
    fact_save,
    fact_set_shareable,
    fact_update,
)

ENDED_LISTED = 20


@tenant_member_required
def memory_list(request: HttpRequest) -> HttpResponse:
    tenant = tenant_of(request)
    page_number = max(1, int_param(request, "page") or 1)  # past the end: an empty page
    standing = current_facts(tenant, request.user, limit=MAX_PAGE_SIZE, kinds=list(STANDING_KINDS))
    ended = fact_history(tenant, request.user, limit=ENDED_LISTED)
    return page(
        request,
        "chats/memories.html",
        {
            "standing": [(m, memory_kind_for(m.kind)) for m in standing],
            "facts": facts_list(
                tenant, request.user, page=page_number, kinds=kinds_sent_in("facts")
            ),
            "ended": [(m, memory_kind_for(m.kind)) for m in ended],
            "form": FactForm(),
        },
    )


@require_POST
@tenant_member_required
def memory_add(request: HttpRequest) -> HttpResponse:
    form = FactForm(request.POST)
    if not form.is_valid():
        if "kind" in form.errors:
            kinds = ", ".join(label.lower() for _, label in memory_kind_choices())
            messages.error(request, f"Choose what it is: {kinds}.")
        else:
            messages.error(request, "Write the memory (at most 2,000 characters).")
        return redirect("chats_ui:memory_list")
    try:
        fact_save(
            tenant_of(request),
            request.user,
            form.cleaned_data["text"],
            key=form.cleaned_data["key"] or None,
            source=FactSource.USER,
            shareable=form.cleaned_data["shareable"],
            kind=form.cleaned_data["kind"],
        )
    except FactRejected as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Saved.")
    return redirect("chats_ui:memory_list")


@tenant_member_required
def memory_edit(request: HttpRequest, fact_id: int) -> HttpResponse:
    tenant = tenant_of(request)
    fact = _fact_or_404(request, fact_id)
    if fact.superseded_at is not None:
        raise Http404("This version is history; edit the current one.")
    form = FactEditForm(
        request.POST or None, initial={"text": fact.text, "shareable": fact.shareable}
    )
    if request.method == "POST" and form.is_valid():
        try:
            fact_update(
                tenant,
                request.user,
                fact.pk,
                form.cleaned_data["text"],
                shareable=form.cleaned_data["shareable"],
            )
        except UserFact.DoesNotExist:
            raise Http404("No such fact.") from None
        except FactRejected as exc:
            form.add_error("text", exc.message)
        else:
            messages.success(request, "Updated; the earlier text is kept in the history.")
            return redirect("chats_ui:memory_list")
    return page(
        request,
        "chats/memory_edit.html",
        {"fact": fact, "kind": memory_kind_for(fact.kind), "form": form},
    )


@require_POST
@tenant_member_required
def memory_share(request: HttpRequest, fact_id: int) -> HttpResponse:
    """Mark a current fact shareable in group chats, or private again."""
    form = FactShareForm(request.POST)
    shareable = form.is_valid() and form.cleaned_data["shareable"]
    try:
        fact_set_shareable(tenant_of(request), request.user, fact_id, shareable)
    except UserFact.DoesNotExist:
        raise Http404("No such fact.") from None
    messages.success(
        request,
        "Shared: group chats may use it." if shareable else "Private: only your own chats use it.",
    )
    return redirect("chats_ui:memory_list")


@require_POST
@tenant_member_required
def memory_delete(request: HttpRequest, fact_id: int) -> HttpResponse:
    try:
        fact_delete(tenant_of(request), request.user, fact_id)
    except UserFact.DoesNotExist:
        raise Http404("No such fact.") from None
    messages.success(request, "Forgotten.")
    return redirect("chats_ui:memory_list")


@tenant_member_required
def memory_history(request: HttpRequest, fact_id: int) -> HttpResponse:
    fact = _fact_or_404(request, fact_id)
    versions = fact_history(tenant_of(request), request.user, fact_id=fact.pk)
    return page(
        request,
        "chats/memory_history.html",
        {"fact": fact, "kind": memory_kind_for(fact.kind), "versions": versions},
    )


def _fact_or_404(request: HttpRequest, fact_id: int) -> UserFact:
    try:
        return fact_get(tenant_of(request), request.user, fact_id)
    except UserFact.DoesNotExist:
        raise Http404("No such fact.") from None
