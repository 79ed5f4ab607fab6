#!/usr/bin/env escript
%% -*- erlang -*-
%%! +sbwt none +sbwtdcpu none +sbwtdio none -kernel logger_level error
%%
%% mailbox.escript: a BEAM node whose supervisor-like process can be flooded until its mailbox
%% runs away, with a Prometheus /metrics endpoint (text format 0.0.4) for epicenter.
%%
%%   escript real/beam/mailbox.escript --port P [--base-rate N] [options]
%%
%% The registered process (default `session_sup`) takes a `{start_session, From, Id}` request,
%% spawns a session process and then waits for that child's `{ack, ChildPid, Reply}` with a
%% selective receive, the way `proc_lib:start_link/3` waits for `init_ack`. The pattern matches
%% on a pid, not on a fresh reference, so the runtime cannot skip the old messages: every wait
%% scans the whole mailbox. Once requests arrive faster than the process drains them, each
%% message costs more than the last and the queue grows without bound.
%%
%% HTTP (127.0.0.1 only):
%%   GET /metrics                      Prometheus text 0.0.4
%%   GET /healthz                      200 "ok"
%%   GET /flood?rate=R&seconds=S       start an extra producer (defaults --flood-rate, --flood-seconds)
%%   GET /calm                         stop every flood producer (the base producer keeps going)
%%   GET /drain                        make the supervisor discard every queued request (a way to
%%                                     recover without a restart: the queue does not drain by itself)
%%
%% Options:
%%   --port P               required
%%   --base-rate N          background requests per second (default 200; 0 = none)
%%   --flood-rate R         default rate of /flood (default 6000)
%%   --flood-seconds S      default duration of /flood (default 60)
%%   --init-ms M            how long a session's init takes before it acks (default 1)
%%   --name NAME            registered name of the supervisor-like process (default session_sup)
%%   --ignore-stdin         do not exit when stdin closes (for callers that start it with stdin
%%                          at /dev/null)
%%
%% The program exits when stdin reaches end-of-file (unless --ignore-stdin) and at once on
%% SIGTERM.
-module(mailbox).
-mode(compile).

-include_lib("inets/include/httpd.hrl").

-export([main/1]).
%% inets httpd callback
-export([do/1]).
%% gen_event callbacks (SIGTERM handler in erl_signal_server)
-export([init/1, handle_event/2, handle_call/2, handle_info/2, terminate/2, code_change/3]).

-define(C_RECEIVED, 1).
-define(C_HANDLED, 2).
-define(C_FLOODS, 3).
-define(C_SESSION_TIMEOUTS, 4).
-define(C_DROPPED, 5).
-define(C_DRAIN_REQUESTS, 6).
-define(TICK_MS, 10).

%% ---------------------------------------------------------------------------------------------
%% Start-up

main(Args) ->
    Opts = parse_args(Args, #{base_rate => 200, flood_rate => 6000, flood_seconds => 60,
                              init_ms => 1, name => session_sup, ignore_stdin => false}),
    Port = case maps:find(port, Opts) of
               {ok, P} -> P;
               error -> usage("--port is required")
           end,
    install_sigterm_handler(),
    log_to_stderr(),
    Counters = counters:new(6, [write_concurrency]),
    persistent_term:put({?MODULE, counters}, Counters),
    persistent_term:put({?MODULE, start_time}, vm_start_time()),
    persistent_term:put({?MODULE, opts}, Opts),
    Name = maps:get(name, Opts),
    InitMs = maps:get(init_ms, Opts),
    Sup = spawn(fun() -> sup_start(Name, InitMs, Counters) end),
    wait_registered(Name, Sup),
    Ctl = spawn(fun() -> flood_ctl_start() end),
    wait_registered(flood_ctl, Ctl),
    case maps:get(base_rate, Opts) of
        0 -> ok;
        Rate -> spawn(fun() -> producer(Name, Rate, infinity, Counters) end)
    end,
    ok = start_httpd(Port),
    io:format("listening on 127.0.0.1:~b~n", [Port]),
    case maps:get(ignore_stdin, Opts) of
        true -> receive after infinity -> ok end;
        false -> stdin_loop()
    end.

parse_args([], Opts) -> Opts;
parse_args(["--port", V | T], O) -> parse_args(T, O#{port => int_arg("--port", V, 1)});
parse_args(["--base-rate", V | T], O) -> parse_args(T, O#{base_rate => int_arg("--base-rate", V, 0)});
parse_args(["--flood-rate", V | T], O) -> parse_args(T, O#{flood_rate => int_arg("--flood-rate", V, 1)});
parse_args(["--flood-seconds", V | T], O) ->
    parse_args(T, O#{flood_seconds => int_arg("--flood-seconds", V, 1)});
parse_args(["--init-ms", V | T], O) -> parse_args(T, O#{init_ms => int_arg("--init-ms", V, 0)});
parse_args(["--name", V | T], O) -> parse_args(T, O#{name => list_to_atom(V)});
parse_args(["--ignore-stdin" | T], O) -> parse_args(T, O#{ignore_stdin => true});
parse_args([Other | _], _) -> usage("unknown argument " ++ Other).

int_arg(Flag, V, Min) ->
    case string:to_integer(V) of
        {N, ""} when N >= Min -> N;
        _ -> usage(Flag ++ " needs an integer >= " ++ integer_to_list(Min))
    end.

usage(Why) ->
    io:format(standard_error,
              "mailbox.escript: ~s~nusage: escript mailbox.escript --port P [--base-rate N] "
              "[--flood-rate R] [--flood-seconds S] [--init-ms M] [--name NAME] [--ignore-stdin]~n",
              [Why]),
    erlang:halt(2).

wait_registered(Name, Pid) ->
    case whereis(Name) of
        Pid -> ok;
        _ -> receive after 1 -> wait_registered(Name, Pid) end
    end.

%% Seconds since the epoch when this VM started; computed once so it never jitters.
vm_start_time() ->
    Native = erlang:system_info(start_time) + erlang:time_offset(),
    erlang:convert_time_unit(Native, native, millisecond) / 1000.

stdin_loop() ->
    case io:get_line(standard_io, "") of
        eof -> erlang:halt(0);
        {error, _} -> erlang:halt(0);
        _ -> stdin_loop()
    end.

start_httpd(Port) ->
    {ok, _} = application:ensure_all_started(inets),
    Root = filename:absname(os:getenv("TMPDIR", "/tmp")),
    Config = [{port, Port},
              {bind_address, {127, 0, 0, 1}},
              {ipfamily, inet},
              {server_name, "mailbox"},
              {server_root, Root},
              {document_root, Root},
              {modules, [?MODULE]},
              {keep_alive, true},
              {keep_alive_timeout, 30},
              {max_clients, 200}],
    case inets:start(httpd, Config) of
        {ok, _Pid} -> ok;
        {error, Reason} ->
            Text = lists:flatten(io_lib:format("~0p", [Reason])),
            Why = case string:find(Text, "eaddrinuse") of
                      nomatch -> Text;
                      _ -> "address already in use"
                  end,
            io:format(standard_error, "mailbox.escript: cannot listen on 127.0.0.1:~b: ~s~n",
                      [Port, Why]),
            erlang:halt(1)
    end.

%% Keep stdout for the `listening on` line: log reports go to stderr.
log_to_stderr() ->
    _ = logger:remove_handler(default),
    ok = logger:add_handler(default, logger_std_h,
                            #{config => #{type => standard_error}, level => error}).

%% ---------------------------------------------------------------------------------------------
%% SIGTERM: halt at once (the default handler runs init:stop/0, which can take a while when a
%% scheduler is busy scanning a huge mailbox).

install_sigterm_handler() ->
    ok = os:set_signal(sigterm, handle),
    case gen_event:swap_handler(erl_signal_server, {erl_signal_handler, []}, {?MODULE, []}) of
        ok -> ok;
        _ -> ok = gen_event:add_handler(erl_signal_server, ?MODULE, [])
    end.

init(_) -> {ok, []}.
handle_event(sigterm, S) -> erlang:halt(0), {ok, S};
handle_event(_, S) -> {ok, S}.
handle_call(_, S) -> {ok, ok, S}.
handle_info(_, S) -> {ok, S}.
terminate(_, _) -> ok.
code_change(_, S, _) -> {ok, S}.

%% ---------------------------------------------------------------------------------------------
%% The supervisor-like process

sup_start(Name, InitMs, Counters) ->
    register(Name, self()),
    put(drains_seen, counters:get(Counters, ?C_DRAIN_REQUESTS)),
    sup_loop(InitMs, Counters).

sup_loop(InitMs, Counters) ->
    receive
        {start_session, _From, Id} ->
            Sup = self(),
            Child = spawn(fun() -> session_init(Sup, Id, InitMs) end),
            %% Selective receive on the child's pid: scans every queued request each time.
            receive
                {ack, Child, _Reply} -> ok
            after 5000 ->
                exit(Child, kill),
                counters:add(Counters, ?C_SESSION_TIMEOUTS, 1)
            end,
            counters:add(Counters, ?C_HANDLED, 1),
            maybe_drain(Counters),
            sup_loop(InitMs, Counters);
        _Stray ->
            %% e.g. an ack that arrived after its timeout
            sup_loop(InitMs, Counters)
    end.

%% /drain bumps a counter; the process notices it between requests and drops its backlog.
maybe_drain(Counters) ->
    Requested = counters:get(Counters, ?C_DRAIN_REQUESTS),
    case get(drains_seen) of
        Requested -> ok;
        _ ->
            put(drains_seen, Requested),
            counters:add(Counters, ?C_DROPPED, drop_queued(0))
    end.

drop_queued(N) ->
    receive
        {start_session, _, _} -> drop_queued(N + 1)
    after 0 -> N
    end.

%% A session's init: waits on a (simulated) resource, then acks its supervisor and ends.
session_init(Sup, Id, InitMs) ->
    receive after InitMs -> ok end,
    Sup ! {ack, self(), {ok, Id}}.

%% ---------------------------------------------------------------------------------------------
%% Producers: send `Rate` requests per second in ticks of 10 ms, for `Seconds` (or forever).

producer(Target, Rate, Seconds, Counters) ->
    Start = erlang:monotonic_time(microsecond),
    Stop = case Seconds of
               infinity -> infinity;
               _ -> Start + Seconds * 1000000
           end,
    producer_loop(whereis(Target), Rate, Start, Stop, 0, Counters).

producer_loop(Pid, Rate, Start, Stop, Sent, Counters) ->
    Now = erlang:monotonic_time(microsecond),
    case Stop =/= infinity andalso Now >= Stop of
        true -> ok;
        false ->
            Due = (Now - Start) * Rate div 1000000,
            N = Due - Sent,
            send_n(Pid, N, Sent),
            counters:add(Counters, ?C_RECEIVED, N),
            receive
                stop -> ok
            after ?TICK_MS ->
                producer_loop(Pid, Rate, Start, Stop, Due, Counters)
            end
    end.

send_n(_Pid, N, _Id) when N =< 0 -> ok;
send_n(Pid, N, Id) ->
    Pid ! {start_session, self(), Id},
    send_n(Pid, N - 1, Id + 1).

%% Keeps the flood producers so /calm can stop them.
flood_ctl_start() ->
    register(flood_ctl, self()),
    flood_ctl_loop([]).

flood_ctl_loop(Floods) ->
    receive
        {flood, From, Rate, Seconds} ->
            Opts = persistent_term:get({?MODULE, opts}),
            Counters = persistent_term:get({?MODULE, counters}),
            Name = maps:get(name, Opts),
            {Pid, _} = spawn_monitor(fun() -> producer(Name, Rate, Seconds, Counters) end),
            counters:add(Counters, ?C_FLOODS, 1),
            From ! {flood_started, self()},
            flood_ctl_loop([Pid | Floods]);
        {calm, From} ->
            [P ! stop || P <- Floods],
            From ! {calmed, self(), length(Floods)},
            flood_ctl_loop(Floods);
        {active, From} ->
            From ! {active, self(), length(Floods)},
            flood_ctl_loop(Floods);
        {'DOWN', _, process, Pid, _} ->
            flood_ctl_loop(lists:delete(Pid, Floods))
    end.

ctl_call(Msg, ReplyTag) ->
    Ctl = whereis(flood_ctl),
    Ctl ! Msg,
    receive
        {ReplyTag, Ctl} -> ok;
        {ReplyTag, Ctl, N} -> N
    after 2000 -> timeout
    end.

%% ---------------------------------------------------------------------------------------------
%% HTTP

do(#mod{request_uri = Uri}) ->
    #{path := Path} = Parsed = uri_string:parse(Uri),
    Query = case maps:find(query, Parsed) of
                {ok, Q} -> uri_string:dissect_query(Q);
                error -> []
            end,
    {Code, Type, Body} = route(Path, Query),
    Bin = iolist_to_binary(Body),
    Headers = [{code, Code},
               {content_type, Type},
               {content_length, integer_to_list(byte_size(Bin))}],
    {proceed, [{response, {response, Headers, [Bin]}}]}.

route("/metrics", _) ->
    {200, "text/plain; version=0.0.4", metrics()};
route("/healthz", _) ->
    {200, "text/plain", "ok\n"};
route("/flood", Query) ->
    Opts = persistent_term:get({?MODULE, opts}),
    Rate = query_int("rate", Query, maps:get(flood_rate, Opts)),
    Seconds = query_int("seconds", Query, maps:get(flood_seconds, Opts)),
    case Rate > 0 andalso Seconds > 0 of
        false ->
            {400, "text/plain", "rate and seconds must be positive integers\n"};
        true ->
            ok = ctl_call({flood, self(), Rate, Seconds}, flood_started),
            {200, "text/plain",
             io_lib:format("flood started: rate=~b seconds=~b~n", [Rate, Seconds])}
    end;
route("/drain", _) ->
    counters:add(persistent_term:get({?MODULE, counters}), ?C_DRAIN_REQUESTS, 1),
    {200, "text/plain", "drain requested\n"};
route("/calm", _) ->
    N = ctl_call({calm, self()}, calmed),
    {200, "text/plain", io_lib:format("stopped ~p flood(s)~n", [N])};
route(_, _) ->
    {404, "text/plain", "not found\n"}.

query_int(Key, Query, Default) ->
    case lists:keyfind(Key, 1, Query) of
        {_, V} when is_list(V) ->
            case string:to_integer(V) of
                {N, ""} -> N;
                _ -> -1
            end;
        _ -> Default
    end.

%% ---------------------------------------------------------------------------------------------
%% Metrics (names as prometheus.erl prints them; the per-process families are epicenter's)

metrics() ->
    Opts = persistent_term:get({?MODULE, opts}),
    Counters = persistent_term:get({?MODULE, counters}),
    Watched = [maps:get(name, Opts), flood_ctl, logger, code_server, application_controller],
    Procs = [{Name, Info} || Name <- Watched,
                             Pid <- [whereis(Name)], is_pid(Pid),
                             Info <- [erlang:process_info(Pid, [message_queue_len, reductions])],
                             is_list(Info)],
    {ContextSwitches, _} = erlang:statistics(context_switches),
    {Reductions, _} = erlang:statistics(reductions),
    Active = case ctl_call({active, self()}, active) of
                 timeout -> 0;
                 N -> N
             end,
    [family("erlang_vm_process_count", gauge,
            "The number of processes currently existing at the local node.",
            [{[], erlang:system_info(process_count)}]),
     family("erlang_vm_process_limit", gauge,
            "The maximum number of simultaneously existing processes at the local node.",
            [{[], erlang:system_info(process_limit)}]),
     family("erlang_vm_statistics_run_queues_length", gauge,
            "Length of normal run queues.",
            [{[], lists:sum(erlang:statistics(run_queue_lengths))}]),
     family("erlang_vm_statistics_reductions_total", counter,
            "Total reductions.", [{[], Reductions}]),
     family("erlang_vm_statistics_context_switches", counter,
            "Total number of context switches since the system started.",
            [{[], ContextSwitches}]),
     family("erlang_vm_memory_bytes_total", gauge,
            "The total amount of memory currently allocated. This is the same as the sum "
            "of the memory size for processes and system.",
            [{[{"kind", "system"}], erlang:memory(system)},
             {[{"kind", "processes"}], erlang:memory(processes)}]),
     family("erlang_vm_process_message_queue_len", gauge,
            "Messages waiting in the mailbox of a registered process (epicenter's family; "
            "prometheus.erl has none for arbitrary processes).",
            [{[{"registered_name", atom_to_list(Name)}], proplists:get_value(message_queue_len, I)}
             || {Name, I} <- Procs]),
     family("erlang_vm_process_reductions_total", counter,
            "Reductions executed by a registered process (epicenter's family, from "
            "erlang:process_info/2).",
            [{[{"registered_name", atom_to_list(Name)}], proplists:get_value(reductions, I)}
             || {Name, I} <- Procs]),
     family("process_start_time_seconds", gauge,
            "Start time of the process since unix epoch in seconds.",
            [{[], persistent_term:get({?MODULE, start_time})}]),
     family("session_requests_received_total", counter,
            "Session start requests sent to the supervisor's mailbox.",
            [{[], counters:get(Counters, ?C_RECEIVED)}]),
     family("session_requests_handled_total", counter,
            "Session start requests the supervisor has taken from its mailbox and finished.",
            [{[], counters:get(Counters, ?C_HANDLED)}]),
     family("session_init_timeouts_total", counter,
            "Session inits that did not ack within 5 s.",
            [{[], counters:get(Counters, ?C_SESSION_TIMEOUTS)}]),
     family("session_requests_dropped_total", counter,
            "Queued session start requests discarded through /drain.",
            [{[], counters:get(Counters, ?C_DROPPED)}]),
     family("session_floods_started_total", counter,
            "Flood producers started through /flood.",
            [{[], counters:get(Counters, ?C_FLOODS)}]),
     family("session_floods_active", gauge,
            "Flood producers currently running.",
            [{[], Active}])].

family(Name, Type, Help, Samples) ->
    [["# HELP ", Name, " ", Help, "\n"],
     ["# TYPE ", Name, " ", atom_to_list(Type), "\n"],
     [[Name, labels(Labels), " ", number(Value), "\n"] || {Labels, Value} <- Samples]].

labels([]) -> [];
labels(Pairs) ->
    ["{", lists:join(",", [[K, "=\"", escape(V), "\""] || {K, V} <- Pairs]), "}"].

escape(V) ->
    lists:flatmap(fun($\\) -> "\\\\";
                     ($") -> "\\\"";
                     ($\n) -> "\\n";
                     (C) -> [C]
                  end, V).

number(V) when is_integer(V) -> integer_to_list(V);
number(V) when is_float(V) -> float_to_list(V, [{decimals, 3}]).
