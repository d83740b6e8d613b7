"""GitHub's news of jobs and what follows: the job book, the scaling step carried out, the warm
pool's job history and each served job's accounting."""
