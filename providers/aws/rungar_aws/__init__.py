"""Rungar's Amazon EC2 provider (``rungar-provider-aws``).

One provider is one region. ``rungar_aws.provider.AwsProvider`` implements the
``rungar.model.provider.Provider`` protocol; boto3 is imported only by ``rungar_aws.ec2``, and
only when a real client is opened, so importing this package costs nothing.
"""
