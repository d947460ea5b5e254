"""Program templates of the offline analyst's catalogue (read as text, never imported)."""
