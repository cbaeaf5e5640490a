"""Conversations moved in and out of the platform, and an account's deletion: importing
ChatGPT's and Claude's exports (:mod:`.conversation_import`), exporting a user's or a tenant's
conversations (:mod:`.conversation_export`), the jobs that run both and report their progress
(:mod:`.jobs`, :mod:`.tasks`), the private files and their expiring download links
(:mod:`.files`), and deleting a user's account (:mod:`.account_deletion`). The readers and
writers of the formats are pure: ``chatplatform.core.transfer``."""
