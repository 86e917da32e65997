"""Seeing what stenograph did: logs, explain(), inspect(), the structured trace and progress lines.

All of it reads the event stream (`stenograph.events`) and the entry caches; nothing here changes
what is compiled.
"""
