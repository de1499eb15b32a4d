"""`lockyard top`: a live terminal view of holders, queues and the wait-for graph."""
