"""Client quotas enforced (Kafka's QuotaFactory managers): see client_quota_manager.py."""
