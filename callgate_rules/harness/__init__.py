"""The users' test harness: policy tests, scenarios, the simulator, evaluation, worlds.
"""
