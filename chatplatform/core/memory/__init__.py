"""What the platform remembers of a user, decided without a database: which statements in a
message are standing instructions or preferences (:mod:`.instructions`). Pure: nothing here
imports Django."""
