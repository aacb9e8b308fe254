"""Drivers: replay, local, anthropic, openai."""
