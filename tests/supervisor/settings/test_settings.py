"""supervisor/settings/: defaults, then OMNIVOICE_* variables, then flags; every field has a flag."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from supervisor.settings import Settings, SettingsError, env_of, flag_of


def parse(argv: list[str], environ: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    Settings.add_arguments(parser)
    return Settings.from_namespace(parser.parse_args(argv), environ or {})


def test_defaults_match_the_design() -> None:
    s = parse(["--model", "m"])
    assert (s.host, s.port, s.devices, s.api_keys) == ("127.0.0.1", 9194, "auto", ())
    assert (
        s.load_timeout_s,
        s.load_total_s,
        s.heartbeat_timeout_s,
        s.ping_timeout_s,
        s.drain_s,
    ) == (120, 600, 60, 10, 60)
    assert (
        s.idle_reap_s,
        s.max_queue_audio_s,
        s.max_batch_size,
        s.max_restarts,
        s.restart_window_s,
    ) == (0, 7200, 64, 5, 600)
    assert s.sidecar.max_frame_bytes == 64 * 2**20 and s.num_step == 32
    assert (s.qa_retries, s.qa_thresholds) == (2, "")  # the checks' own defaults


def test_flag_beats_environment_beats_default() -> None:
    env = {"OMNIVOICE_PORT": "9000", "OMNIVOICE_IDLE_REAP_S": "30", "OMNIVOICE_MODEL": "env-model"}
    s = parse(["--port", "9100"], env)
    assert (s.port, s.idle_reap_s, s.model) == (9100, 30.0, "env-model")


def test_api_keys_repeat_as_flags_and_split_on_commas_in_the_environment() -> None:
    assert parse(["--engine", "null", "--api-key", "a", "--api-key", "b"]).api_keys == ("a", "b")
    assert parse(["--engine", "null"], {"OMNIVOICE_API_KEYS": "x, y"}).api_keys == ("x", "y")
    assert parse(["--engine", "null", "--api-key", "z"], {"OMNIVOICE_API_KEYS": "x"}).api_keys == (
        "z",
    )
    assert "api_keys" in Settings(engine="null", api_keys=("secret",)).public()
    assert "secret" not in str(Settings(engine="null", api_keys=("secret",)).public())


def test_booleans_and_optionals_from_the_environment() -> None:
    s = parse(["--engine", "null"], {"OMNIVOICE_CACHE_SHARED": "yes", "OMNIVOICE_PID_FILE": ""})
    assert s.cache_shared is True and s.pid_file is None
    assert (
        parse(
            ["--engine", "null", "--no-cache-shared"], {"OMNIVOICE_CACHE_SHARED": "1"}
        ).cache_shared
        is False
    )


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--engine", "omnivoice"], {}, "--model"),
        (["--engine", "null", "--devices", "gpu0"], {}, "--devices"),
        (["--engine", "null", "--port", "0"], {}, "--port"),
        (["--engine", "null", "--heartbeat-timeout-s", "-1"], {}, "must not be negative"),
        (["--engine", "null"], {"OMNIVOICE_PORT": "eighty"}, "OMNIVOICE_PORT must be a number"),
        (["--engine", "null"], {"OMNIVOICE_CACHE_SHARED": "maybe"}, "true or false"),
        (["--engine", "null", "--max-batch-size", "0"], {}, "at least 1"),
        (["--engine", "null", "--qa-thresholds", "max_gap=3"], {}, "--qa-thresholds"),
        (["--engine", "null"], {"OMNIVOICE_QA_THRESHOLDS": "min_rms_db=6"}, "0 or below"),
        (["--engine", "null", "--qa-retries", "-1"], {}, "must not be negative"),
        # Blank keys from the environment: an open server is never what ", ," meant.
        (["--engine", "null"], {"OMNIVOICE_API_KEYS": ", ,"}, "must not be empty or blank"),
        (["--engine", "null"], {"OMNIVOICE_API_KEYS": ""}, "must not be empty or blank"),
        (["--engine", "null"], {"OMNIVOICE_API_KEYS": "sk-a,,sk-b"}, "must not be empty"),
        (["--engine", "null"], {"OMNIVOICE_API_KEY": " "}, "must not be empty or blank"),
        (["--engine", "null", "--allowed-hosts", "a b"], {}, "--allowed-hosts"),
        (["--engine", "null", "--body-deadline-s", "0"], {}, "--body-deadline-s"),
    ],
)
def test_bad_values_name_the_setting(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        parse(argv, environ)


def test_every_field_has_a_flag_a_variable_and_help() -> None:
    parser = argparse.ArgumentParser()
    Settings.add_arguments(parser)
    text = parser.format_help()
    for f in dataclasses.fields(Settings):
        assert flag_of(f) in text and env_of(f) in text.replace("\n", "").replace(" ", "")
        assert f.metadata["help"]
    for flag in (
        "--model",
        "--host",
        "--port",
        "--devices",
        "--api-key",
        "--data-dir",
        "--pid-file",
        "--log-dir",
    ):
        assert flag in text


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings(engine="null").port = 1  # type: ignore[misc]


def test_the_store_is_sqlite_or_a_postgresql_url_whose_password_is_never_shown() -> None:
    assert parse(["--model", "m"]).store == "sqlite"
    url = "postgresql://omnivoice:s3cret@db.internal:5432/tts?sslmode=require"
    s = parse(["--model", "m"], {"OMNIVOICE_STORE": url})
    assert s.store == url
    shown = s.public()["store"]
    assert "s3cret" not in shown and shown == "postgresql://omnivoice:***@db.internal:5432/tts"
    with pytest.raises(SettingsError, match=r"--store \(OMNIVOICE_STORE\) must be sqlite"):
        parse(["--model", "m", "--store", "mysql://root:pw@db/tts"])
    with pytest.raises(SettingsError, match="--lease-s"):
        parse(["--model", "m", "--lease-s", "1"])


def test_callback_hosts_repeat_and_need_a_secret_that_health_never_shows() -> None:
    parser = argparse.ArgumentParser()
    Settings.add_arguments(parser)
    namespace = parser.parse_args(
        [
            "--callback-allow",
            "hooks.example.com",
            "--callback-allow",
            "127.0.0.1",
            "--callback-secret",
            "whsec-hidden",
        ]
    )
    settings = Settings.from_namespace(namespace, environ={"OMNIVOICE_ENGINE": "null"})
    assert settings.callback_allow == ("hooks.example.com", "127.0.0.1")
    assert "whsec-hidden" not in str(settings.public())
    from_env = Settings.from_sources(
        environ={
            "OMNIVOICE_ENGINE": "null",
            "OMNIVOICE_CALLBACK_ALLOW": "a.example, b.example",
            "OMNIVOICE_CALLBACK_SECRET": "s",
        }
    )
    assert from_env.callback_allow == ("a.example", "b.example")
    with pytest.raises(SettingsError, match="--callback-allow needs --callback-secret"):
        Settings(engine="null", callback_allow=("hooks.example.com",))
