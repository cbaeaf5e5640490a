"""The tenant admin's console: the Django admin's registrations of the platform's models,
policies with their preview and copy, usage and cost reports, invitations, and the admin site
that lets tenant admins in. Above the apps (the preview assembles a turn with ``chats``, the
reports read ``summaries``); only the configuration is above it."""
