"""Scoring one data set on several machines or replicas: `--shard I/N` runs and their merge (`shards`),
and replicas on a local Ray or a cluster (`ray`). Knows nothing about how one trajectory is scored
(that is `scoring` and the pipeline).
"""
