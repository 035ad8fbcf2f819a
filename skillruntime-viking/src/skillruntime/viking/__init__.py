"""Viking artifact store: OpenViking skill revisions as verified local directories (to come)."""
