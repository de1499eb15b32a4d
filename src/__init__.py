"""lockyard: file locks and a deadlock monitor for parallel coding agents."""
