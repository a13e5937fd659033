"""Every state change of the domain lives here; views and tasks call these."""
