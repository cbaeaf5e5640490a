"""Conversations, their participants and messages, and the per-turn record of what each prompt
held: the conversation records that chats, summaries and memory all read.

They live in the platform layer so that the apps depend on them and not on each other (a
summary covers messages, a fact cites its source message), and carry the platform's app label
(``chatplatform``): their migrations and admin pages are the platform's. Their tables keep the
names they were created with (``chats_*``, ``db_table``): raw SQL, indexes and the SQLite
full-text triggers name them."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q

from chatplatform.tenancy.scoping import TenantOwnedModel, TenantScopedManager


class Conversation(TenantOwnedModel):
    """A chat between one or more users and the bot.

    ``last_seq`` allocates message sequence numbers (incremented under a row lock);
    ``history_tokens`` is the running total of stored message tokens: what sending the whole
    history would cost (the hypothetical prompt tokens a turn record compares with) without
    summing it each turn.
    """

    title = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    participants: models.ManyToManyField = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Participant", related_name="conversations"
    )
    is_group = models.BooleanField(default=False)
    continues = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="continued_by",
        help_text="An earlier conversation of the same user whose latest summary is carried in.",
    )
    carry_over_summary = models.BooleanField(
        default=True, help_text="Carry the continued conversation's summary into the context."
    )
    policy = models.ForeignKey(
        "chatplatform.ContextPolicy",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Overrides the tenant's active policy for this conversation.",
    )
    last_seq = models.PositiveBigIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    history_tokens = models.PositiveBigIntegerField(default=0)
    archived_at = models.DateTimeField(null=True, blank=True)
    #: The cached history window: the seq its oldest message has, and when a prompt holding
    #: it was last sent. While the provider's cache keeps it, later turns append to it.
    window_start_seq = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    window_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: The retrieved messages the window holds (ids, chronological), sent again unchanged.
    window_recalled_ids = models.JSONField(default=list, blank=True, editable=False)
    #: Those of them the window shows as excerpts (a reply's head): shown so again.
    window_excerpt_ids = models.JSONField(default=list, blank=True, editable=False)
    #: The summaries the window's prompt showed (ids): shown again, unchanged, while it is
    #: kept; a newer summary waits for the next restart (its messages are in the window).
    window_summary_ids = models.JSONField(default=list, blank=True, editable=False)
    #: The whole history's prompt tokens at that turn: what sending it all would have left in
    #: the provider's cache, for the comparison of each turn's bill.
    window_full_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    #: The system prompt an SDK client sent with its latest request (the SDK-compatible API):
    #: framed as data after the platform's own system prompt, never in its place.
    client_system = models.TextField(blank=True, default="", editable=False)
    #: The id an export gave the conversation it was imported from (ChatGPT's conversation
    #: id, Claude's uuid, or the platform's own export id): importing it again for the same
    #: user adds only the messages it lacks. Empty for conversations started here.
    source_id = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "chats_conversation"
        indexes = [
            models.Index(fields=["tenant", "-updated_at"], name="conversation_recent_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "created_by", "source_id"],
                condition=~Q(source_id=""),
                name="conversation_unique_source",
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Participant(TenantOwnedModel):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "chats_participant"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "conversation", "user"], name="participant_unique"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "user"], name="participant_user_idx")]


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    SYSTEM = "system", "System"
    TOOL = "tool", "Tool"


class Status(models.TextChoices):
    STREAMING = "streaming", "Streaming"
    COMPLETE = "complete", "Complete"
    FAILED = "failed", "Failed"
    INCOMPLETE = "incomplete", "Incomplete"


class Message(TenantOwnedModel):
    """One message. ``seq`` is unique and gapless-ish per conversation (allocated in order).

    ``token_count`` is computed once at save time by the counter named in ``token_counter``;
    NULL for legacy rows (estimated on the fly at assembly and backfilled later).
    ``client_id`` makes its author's sends idempotent (each sender has their own client ids,
    shown to no one else); ``answers`` links an assistant reply to the user
    message it answers, and the database allows at most one reply per user message.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveBigIntegerField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    #: The API key the message was sent with (its spending is counted against the key's
    #: limit); empty for the web UI.
    api_key = models.ForeignKey(
        "chatplatform.ApiKey", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    content = models.TextField()
    reply_to = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The message this one quotes (group chats).",
    )
    answers = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="For assistant replies: the user message answered.",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    token_count = models.PositiveIntegerField(null=True, blank=True)
    token_counter = models.CharField(max_length=40, blank=True)
    client_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    attachment = models.FileField(upload_to="attachments/%Y/%m/", null=True, blank=True)
    attachment_type = models.CharField(max_length=40, blank=True)
    attachment_bytes = models.PositiveIntegerField(null=True, blank=True)
    #: When its author last edited the text (the earlier texts are its revisions).
    edited_at = models.DateTimeField(null=True, blank=True)
    #: The tools an assistant reply called, for the client that offered them to run
    #: (``[{"id", "name", "input"}]``, the SDK-compatible API); its text may be empty.
    tool_calls = models.JSONField(null=True, blank=True, editable=False)
    #: What a tool message holds: the results of those calls as the client sent them
    #: (``[{"tool_use_id", "content", "is_error"}]``); ``content`` is their text.
    tool_results = models.JSONField(null=True, blank=True, editable=False)
    #: Shared by a reply's tool calls and the message of their results, which the prompt
    #: keeps or drops together (the calls' first id).
    tool_group = models.CharField(max_length=64, null=True, blank=True, editable=False)  # noqa: DJ001
    #: The tools the client offered the reply to this message, which the client runs itself
    #: (``{"tools": [{"name", "description", "input_schema"}], "choice": ...}``, the
    #: SDK-compatible API).
    offered_tools = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "chats_message"
        ordering = ["conversation_id", "seq"]
        constraints = [
            # Covering: the assembly walks (conversation, seq desc) reading token counts only,
            # then fetches the contents of the chosen rows (index-only scan on PostgreSQL).
            models.UniqueConstraint(
                fields=["tenant", "conversation", "seq"],
                include=["token_count", "role"],
                name="message_unique_seq",
            ),
            # A client id is the sender's: another member's message never answers for it.
            models.UniqueConstraint(
                fields=["tenant", "conversation", "author", "client_id"],
                condition=Q(client_id__isnull=False),
                name="message_unique_author_client_id",
            ),
            models.UniqueConstraint(
                fields=["tenant", "answers"],
                condition=Q(answers__isnull=False),
                name="message_one_reply_per_message",
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "token_counter"],
                condition=Q(token_count__isnull=True),
                name="message_uncounted_idx",
            ),
            # Holds only replies being streamed: the stale-reply sweep reads it every minute.
            models.Index(
                fields=["tenant", "updated_at"],
                condition=Q(status="streaming"),
                name="message_streaming_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}: {self.content[:40]}"


class RevisionReason(models.TextChoices):
    EDITED = "edited", "Edited by its author"
    REGENERATED = "regenerated", "Reply regenerated"
    RESENT = "resent", "Reply replaced after its message was edited"


class MessageRevision(TenantOwnedModel):
    """An earlier version of a message, kept when the message changed: the text its author
    replaced by editing it, or a reply superseded by a regenerated one. Revisions are never
    sent to the model (the message row holds the current version); they stay for audits.
    ``turn`` repeats the superseded reply's usage (its turn record stays, marked superseded:
    the provider billed it, so usage reports count it)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="revisions")
    reason = models.CharField(max_length=16, choices=RevisionReason.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    error_code = models.CharField(max_length=40, blank=True)
    token_count = models.PositiveIntegerField(null=True, blank=True)
    token_counter = models.CharField(max_length=40, blank=True)
    turn = models.JSONField(default=dict, blank=True)
    #: When the superseded version was written, and who replaced it when.
    written_at = models.DateTimeField()
    revised_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revised_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "chats_messagerevision"
        ordering = ["message_id", "revised_at"]
        indexes = [
            models.Index(fields=["tenant", "message", "revised_at"], name="revision_message_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.reason} #{self.message_id}: {self.content[:40]}"


class TurnRecordManager(TenantScopedManager):
    def current(self) -> models.QuerySet:
        """The records of the turns whose replies stand (none superseded): "the" record of a
        message or turn. Usage sums read every record, superseded ones included."""
        return self.get_queryset().filter(superseded_at__isnull=True)


class TurnRecord(TenantOwnedModel):
    """What one turn's prompt held and what it cost.

    One current record per user message answered. A reply regenerated, or replaced after its
    message was edited, keeps its record with ``superseded_at`` set (so does an earlier attempt
    the provider billed): usage reports count it, while "the record of this message's turn"
    (the meter, the REST turn record, the finish of the reply) is the current one only
    (``TurnRecord.objects.current()``).

    Token fields are in tokens of the policy model's counter; ``hypothetical_tokens`` is what
    sending the full history would have cost. ``cost_usd`` uses the ModelProfile's prices.
    """

    #: The conversation and message are emptied when the conversation is deleted (by its
    #: owner or by the tenant's retention): the record stays, with its cost figures and
    #: ``user``, for the usage reports.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user_message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    #: Whose message the turn answered: usage per member, kept when the message is gone.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    #: The API key the turn's message was sent with: usage and spending per key.
    api_key = models.ForeignKey(
        "chatplatform.ApiKey", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    assistant_message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    policy = models.ForeignKey(
        "chatplatform.ContextPolicy", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    model_profile = models.ForeignKey(
        "chatplatform.ModelProfile", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    strategy = models.CharField(max_length=32)
    counter = models.CharField(max_length=40)
    budget_tokens = models.PositiveIntegerField()
    sections = models.JSONField(default=dict)
    included = models.JSONField(default=list)
    excluded = models.JSONField(default=list)
    prompt_tokens_estimated = models.PositiveIntegerField()
    prompt_tokens_reported = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cache_write_tokens = models.PositiveIntegerField(default=0)
    hypothetical_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    #: What the turn would have cost sending the whole history with prompt caching (a
    #: breakpoint on the newest message, reading what the previous turn wrote while cached).
    full_history_cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    time_to_first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    #: What the provider's own context management did this turn: ``compaction`` (the summary
    #: it became, the seq range it covers, its own billed usage and cost) and
    #: ``applied_edits`` (what context editing cleared, as the provider reported it).
    provider_context = models.JSONField(default=dict, blank=True)
    assembly_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: When a newer turn took this one's place (its reply regenerated or its message edited,
    #: or a billed attempt retried); empty while it is the message's current record.
    superseded_at = models.DateTimeField(null=True, blank=True)

    objects: ClassVar[TurnRecordManager] = TurnRecordManager()

    class Meta:
        db_table = "chats_turnrecord"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "user_message"],
                condition=Q(superseded_at__isnull=True),
                name="turn_unique_current_message",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "conversation", "-created_at"], name="turn_conv_idx"),
            models.Index(fields=["tenant", "created_at"], name="turn_usage_idx"),
        ]


class MessageEmbedding(TenantOwnedModel):
    """A message's sentence embedding for dense retrieval (``chats.retrieval.dense``).

    ``vector``: float16 little-endian, unit length (384 values, 768 bytes for MiniLM), made by
    the model named in ``model`` (vectors of another model are never compared with it);
    ``seq`` repeats the message's, so the retriever reads a conversation's newest vectors
    through one index range without joining messages. Written in the background (Celery), once
    per message and model.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="embeddings")
    seq = models.PositiveBigIntegerField()
    model = models.CharField(max_length=64)
    vector = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "chats_messageembedding"
        constraints = [
            # One vector per message and model; also the retriever's index (newest first).
            models.UniqueConstraint(
                fields=["tenant", "conversation", "model", "seq"],
                name="embedding_unique_seq",
            ),
        ]
        indexes = [
            # The vectors a conversation's index does not hold yet (ids above the ones it
            # covers), read each turn, and the index job's bounded reads in insertion order.
            models.Index(fields=["tenant", "conversation", "model", "id"], name="embedding_id_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.model}"


class MessageVectorIndex(TenantOwnedModel):
    """A conversation's approximate nearest-neighbour index over its message embeddings
    (``chats.retrieval.vector_index``), shared by every process through the database.

    ``data``: the serialised graph (``engine`` names the library and layout: an index of another
    engine is rebuilt, never loaded); its keys are ``MessageEmbedding`` ids, all of them at most
    ``covered_id`` (newer vectors are scanned exactly until the job adds them). ``size`` is how
    many vectors it holds, dropped ones included (those are filtered when read, and a rebuild
    leaves them out). ``version`` grows with every write: processes cache a loaded index by it.
    Written by the embedding job only.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=64)
    engine = models.CharField(max_length=64)
    data = models.BinaryField()
    size = models.PositiveIntegerField(default=0)
    covered_id = models.PositiveBigIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "chats_messagevectorindex"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "conversation", "model"], name="vector_index_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} index v{self.version} ({self.size} vectors)"


class ConversationFingerprint(TenantOwnedModel):
    """Where an SDK client's resent history continues a conversation (the SDK-compatible API):
    the hash chain of the client's messages up to the last one stored (``fingerprint``, over
    ``message_count`` messages, the first of which hashes to ``first_hash``) and the seq of that
    stored message. A request whose messages start with the same chain continues the
    conversation; what follows ``through_seq`` is compared message by message."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    first_hash = models.CharField(max_length=64)
    fingerprint = models.CharField(max_length=64)
    message_count = models.PositiveIntegerField()
    through_seq = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "conversation"], name="fingerprint_one_per_conversation"
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "user", "first_hash", "-updated_at"],
                name="fingerprint_first_idx",
            ),
        ]


class OpenAIResponse(TenantOwnedModel):
    """A response of the OpenAI Responses API (the SDK-compatible API): the turn it stands for
    (``user_message``, answered by its reply) in its conversation, and what the client sent
    beside the message, so that the response object can be fetched again and named by a later
    request's ``previous_response_id`` (which continues ``conversation``).

    ``public_id`` is the ``resp_...`` id the client sees (random, not the row's id). A response
    made with ``store: false`` keeps its row (``stored`` false) so that its id is known to be
    not fetchable rather than unknown; its messages are part of the conversation either way.
    ``user`` is the API key's user: only they fetch or chain it."""

    public_id = models.CharField(max_length=64)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    user_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    previous_response_id = models.CharField(max_length=64, blank=True)
    instructions = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    #: The model name the response reports (the policy model's when it was made).
    model = models.CharField(max_length=200)
    stored = models.BooleanField(default=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "public_id"], name="openai_response_unique_id"
            ),
        ]
