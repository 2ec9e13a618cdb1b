"""The tasks, between the axes (parallel) and the models (nn): what a run learns and how it is
scored. task (node, link or edge: seeds, batch sampler, forward, loss; make_task), node_metrics
(a node target kind's output width, loss and metrics), scores (ROC-AUC, AP, Hits@K, MRR and the
link / edge accumulators, used by node metrics too), evaluation (the one evaluation) and
link_evaluation (scoring a link split)."""
