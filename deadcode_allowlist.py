"""Names the dead-code check (vulture, ``make lint``) cannot see used: each is read by a
framework or a library by its name, from a string, or through an interface the code does not
call itself. Reviewed by hand; a name belongs here only with the reason of its group. Whatever
else vulture reports is dead code, to be removed. Configuration: ``[tool.vulture]`` in
``pyproject.toml`` (which also names the decorators whose functions a framework calls)."""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Django model and app machinery: inner classes and class attributes Django reads.
_.Meta
_.abstract
_.verbose_name
_.verbose_name_plural
_.default_auto_field
_.ChatplatformConfig
_.ChatsConfig
_.MemoryConfig
_.SummariesConfig
_.ToolingConfig
_.ConsoleConfig
_.app_name  # URL namespaces
_.summary_instructions  # imported by ChatsConfig.ready() for its signal receiver

# Choices members (TextChoices): stored and compared by their values, listed in forms.
_.SLIDING_WINDOW
_.ROLLING_SUMMARY
_.SERVER_COMPACTION
_.TOOL_USES
_.THINKING
_.TOOL_USES_AND_THINKING
_.PERCENT
_.ANTHROPIC
_.OPENAI
_.OFFLINE

# Model fields read through the ORM, the admin, the REST API's serializers or templates.
_.joined_at
_.assistant_message
_.time_to_first_token_ms
_.accepted_by
_.calibration_updated_at
_.superseded_by
_.merged_into

# Classes and callables named by dotted path in the settings (not scanned: Django reads them).
_.ChatPlatformAdminSite
_.ChatPlatformAdminConfig
_.TenantScopeMiddleware
_.AddressLimitedDatabaseHandler  # AXES_HANDLER
_.lockout_response  # AXES_LOCKOUT_CALLABLE
_.original_response  # its signature is axes'
_.ApiKeyAuthentication  # REST_FRAMEWORK
_.TenantSessionAuthentication
_.HasTenantPrincipal
_.ApiAutoSchema
_.content_security_policy  # called by the settings
_.rest_framework_settings
_.API_SCHEMA_SETTINGS

# The admin: options, hooks and inline/filter attributes Django's admin reads by name.
_.list_display
_.list_filter
_.list_select_related
_.search_fields
_.date_hierarchy
_.fieldsets
_.inlines
_.fk_name
_.actions
_.save_as
_.css
_.Media
_.lookups
_.parameter_name
_.has_delete_permission
_.has_permission
_.has_update_from_provider_permission  # the "update_from_provider" action's permission
_.get_readonly_fields
_.get_prepopulated_fields
_.save_formset
_.site_header
_.site_title
_.index_title
_.default_site
_.label_from_instance  # model choice fields' labels
_.required  # a form field's attribute set on the instance

# Management commands: Django calls these by name.
_.help
_.add_arguments

# Forms: fields declared on the class, read by Django's form machinery.
_.clear_api_key
_.clean_kind  # a form's ``clean_<field>``, called by Django's form validation
_.clean_issuer
_.clean_email_domains

# requests' session attribute, read by requests (single sign-on ignores proxy variables).
_.trust_env

# The REST API (Django REST framework, drf-spectacular): serializer fields and Meta options,
# ``get_<field>`` of method fields, ``validate_<field>``, view and renderer attributes and
# overridden hooks with the framework's own signatures.
_.read_only_fields
_.extra_kwargs
_.key_prefix
_.savings_tokens
_.this_month
_.spent_usd
_.spent_tokens
_.savings_usd
_.extra_cost_usd
_.cache_simulated
_.dense_retrieval
_.get_cost
_.get_archived
_.get_current
_.get_client_id
_.get_image
_.get_shared
_.validate_participants
_.pagination_class
_.authentication_classes
_.permission_classes
_.renderer_class
_.charset
_.accepted_media_type
_.renderer_context
_.get_renderers
_.get_authenticators  # the SDK-compatible API: its protocol's key, its error shape
_.get_exception_handler
_.get_page_size
_.get_rate
_.authenticate_header
_.ApiKeyScheme  # drf-spectacular finds its extensions by subclassing
_.TenantSessionScheme
_.target_class
_.priority
_.get_security_definition
_.auto_schema

# Channels: a consumer's handlers are called by the event's type (``chat.events`` ->
# ``chat_events``, ``access.changed`` -> ``access_changed``); overridden hooks.
_.chat_events
_.access_changed
_.encode_json
_.bytes_data

# Templates read these (dataclass fields and attributes of what views pass them).
_.may_delete
_.earlier_before_seq
_.backfill_signature
_.backfill_verified_upto
_.backfill_updated_at
_.model_window  # MessageFit.as_dict, the chat page's fit hint

# Settings the provider registry reads by name (each entry lists its keys), which tests set.
_.OPENAI_API_KEY
_.OPENAI_BASE_URL

# Libraries' attributes and hooks set or overridden by name.
_.axes_credentials  # django-axes reads it from the request
_.max_seq_length  # sentence-transformers' model
_.validateLink  # markdown-it's link check
_.health_check_done  # Django's connection (chatplatform/django_internals.py)
_.should_exit  # uvicorn's server loop (servers started by tests)

# A column index named for the tuple's symmetry (units.py unpacks every field's position).
_.CREATED_AT

# pytest: module marks, hooks, fixtures requested only for their effect, and hook arguments.
_.pytestmark
_.pytest_collection_modifyitems
_.django_db_setup
_.django_db_modify_db_settings_parallel_suffix
_.transactional_db
_.settings_override
_.limits
_.reaches
_.alices_facts
_.endless
_.redis_down
_.jobs_now
_.reader  # asyncio.start_server's callback signature
_.exc_type  # __exit__'s signature
_.tb
_.optionxform  # configparser: keep the case of keys
_.do_GET  # http.server's handler methods, called by the server by name
_.log_message
_.skip_postgeneration_save  # factory-boy
_.extracted
_.CONTENT_SECURITY_POLICY_REPORT_ONLY  # a setting overridden in a test

# usearch's index reads its search setting through a property the adapter sets
# (chats/retrieval/ann.py).
_.expansion_search

# Spending-limit fields: set in the admin, read by the limit check's SQL
# (chatplatform/spending.py selects the columns by name).
_.spend_soft_usd
_.spend_soft_tokens
_.spend_hard_tokens
# Conversations moved in and out: a format choice the import form names by its value, when a
# transfer ended (shown in the admin's listing of the row), the deletion form's confirmation
# (read from cleaned_data by its name).
_.CHATGPT
_.finished_at
_.confirm
# ONNX Runtime's session options: set on its options object, read by the runtime
# (chats/retrieval/onnx_encoder.py).
_.intra_op_num_threads
_.inter_op_num_threads
_.graph_optimization_level
