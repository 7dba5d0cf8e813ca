"""What every layer stands on: the settings, the clock, the one refusal, durations, deadlines and local times.

Nothing here imports another package of pbm_server.
"""
