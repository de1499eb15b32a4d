"""`lockyard web`: a local page of holders, queues, the wait-for graph and a timeline."""
