"""What the agents did, read from their logs: tool calls, their targets, next actions, rediscovery.

The continuation exam grades against these (docs/exams.md).
"""
