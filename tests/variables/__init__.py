"""Unit tests of the value trackers (`stenograph.variables`): the protocol and the trace policy."""
