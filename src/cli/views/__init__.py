"""What `lockyard top` and `lockyard web` share: the present of a lock store, by push."""
