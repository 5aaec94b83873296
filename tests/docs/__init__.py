"""The docs site's tests: every example of docs/ runs, the generated reference is current, every
CLI option, rule and client has its page, and a release builds and installs."""
