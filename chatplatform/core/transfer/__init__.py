"""Conversations moved in and out of the platform, as other chat services export them: the
readers of ChatGPT's and Claude's ``conversations.json`` (:mod:`.chatgpt`, :mod:`.claude`),
the records they read into (:mod:`.records`), and the writers of the platform's own exports
(Claude's shape, and Markdown: :mod:`.writers`). Pure: no framework, no database."""
