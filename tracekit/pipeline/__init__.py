"""The pipeline: one orchestration of the stages for a whole run or a partitioned one.

    stages        the stage sequence (parse, attribute, measure, cross-rank, findings), run
                  by :func:`stages.execute` over an Execution, with the stage progress
    in_memory     Execution InMemory: the whole run in this process (what tracekit.api runs)
    partitioned   Execution Partitioned: rank by rank into a Parquet dataset
      batches       which rank files one task takes; what a worker sends back
      per_rank      the worker: parse, attribute, measure each rank of a task, write its parts
      rank_measures a rank's ATTRIBUTED without the rules (the measures are
                    tracekit.measure.run's per-rank half)
      batch_split   a batch's tables cut back into its ranks
      parts         the dataset's layout, writes and reads
      across_ranks  the run-wide stages on the parts
    request       an analysis as a command asks for it: the execution and the derived cache
    cache         the derived-result cache
"""
