# bash completion for leakproof                              -*- shell-script -*-
#
# Installed as $(DATADIR)/bash-completion/completions/leakproof; or, by hand:
#     source completion/leakproof.bash
#
# The subcommands are read from the program's own help (`leakproof --help`)
# and the options of each from the table the program reads them with
# (`leakproof help --complete-options CMD`), the first time they are
# needed, so a new option is completed without touching this file. The
# values of a few options are listed here (--format, --measure, --restart,
# --stop-signal, --expect, --executor); those of --format and --measure are offered only where the
# option's help (`leakproof CMD --help`) names them. t/e2e/test_completion.py
# checks them against the help texts. `attach` offers the pids of the
# caller's processes, and for --slurm-job the ids of the caller's running
# SLURM jobs. Run ids come from `leakproof ls` on the store named on the
# command line (--store), else the default one.

# The help and the options of the leakproof being completed, cached per
# program and command.
declare -gA _leakproof_help_cache 2>/dev/null || true

_leakproof_help()
{
	local bin=$1 cmd=$2 key="$1 $2"
	if [[ -z ${_leakproof_help_cache[$key]+set} ]]; then
		if [[ -n $cmd ]]; then
			_leakproof_help_cache[$key]=$("$bin" "$cmd" --help 2>/dev/null)
		else
			_leakproof_help_cache[$key]=$("$bin" --help 2>/dev/null)
		fi
	fi
	printf '%s\n' "${_leakproof_help_cache[$key]}"
}

# The command names: the lines under "commands:" in `leakproof --help`.
_leakproof_commands()
{
	_leakproof_help "$1" "" | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\)  .*/\1/p'
}

# One line per option of CMD: "--long ARG", "-s ARG", "--flag", "--opt[=ID]".
_leakproof_options()
{
	local key="$1 $2 --complete-options"
	if [[ -z ${_leakproof_help_cache[$key]+set} ]]; then
		_leakproof_help_cache[$key]=$("$1" help --complete-options "$2" 2>/dev/null)
	fi
	printf '%s\n' "${_leakproof_help_cache[$key]}"
}

# The help paragraph of option $3 of command $2: its line and the deeper
# indented lines under it.
_leakproof_option_help()
{
	_leakproof_help "$1" "$2" | awk -v opt="$3" '
		$0 ~ "^  +(-[A-Za-z], )?" opt "([ =[]|$)" { on = 1; print; next }
		on && /^          / { print; next }
		{ on = 0 }'
}

# Those of the words $4 that the help of option $3 names: the values this
# leakproof takes (a format added to the program is offered once it is
# added to the list below, and never before the program has it).
_leakproof_named()
{
	local text w
	text=$(_leakproof_option_help "$1" "$2" "$3")
	for w in $4; do
		[[ $text =~ (^|[^a-z-])$w([^a-z-]|$) ]] && printf '%s\n' "$w"
	done
}

# Whether option $3 of command $2 takes a value in the next word.
_leakproof_takes_value()
{
	local line
	while read -r line; do
		[[ $line == "$3 "* ]] && return 0
	done < <(_leakproof_options "$1" "$2")
	return 1
}

# Run ids of the store named in the words typed so far, newest first.
_leakproof_run_ids()
{
	local bin=$1 i store=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--store | -s) store=(--store "${COMP_WORDS[i + 1]}") ;;
		--store=*) store=(--store "${COMP_WORDS[i]#--store=}") ;;
		esac
	done
	"$bin" ls "${store[@]}" 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }'
}

_leakproof_files()
{
	compopt -o filenames 2>/dev/null
	mapfile -t COMPREPLY < <(compgen -f -- "$1")
}

_leakproof()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local bin=${COMP_WORDS[0]} cmd="" cmd_at=0 i values=""
	COMPREPLY=()
	[[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}

	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) cmd=${COMP_WORDS[i]} cmd_at=$i; break ;;
		esac
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--help --version" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$(_leakproof_commands "$bin")" -- "$cur")
		fi
		return 0
	fi
	if [[ $cmd == help ]]; then
		((COMP_CWORD == cmd_at + 1)) &&
			mapfile -t COMPREPLY < <(compgen -W "$(_leakproof_commands "$bin" | grep -vx help)" -- "$cur")
		return 0
	fi

	# `run ... -- COMMAND ARGS`: complete the job's command line.
	for ((i = cmd_at + 1; i < COMP_CWORD; i++)); do
		[[ ${COMP_WORDS[i]} == -- && $cmd == run ]] || continue
		if declare -F _command_offset >/dev/null; then
			_command_offset $((i + 1))
		elif ((COMP_CWORD == i + 1)); then
			mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		else
			_leakproof_files "$cur"
		fi
		return 0
	done

	# An option's value, typed as --opt=VALUE or --opt VALUE.
	local opt=""
	if [[ $cur == --*=* ]]; then
		opt=${cur%%=*} cur=${cur#*=}
	elif ((COMP_CWORD > cmd_at + 1)) && [[ $prev == -* ]] &&
		_leakproof_takes_value "$bin" "$cmd" "$prev"; then
		opt=$prev
	fi
	if [[ -n $opt ]]; then
		case $opt in
		--store | -s | --output | -o | --log)
			_leakproof_files "$cur"
			return 0
			;;
		--format | -f) values=$(_leakproof_named "$bin" "$cmd" --format "text md csv json html svg junit") ;;
		--measure | -m) values=$(_leakproof_named "$bin" "$cmd" --measure "pss rss uss cgroup gpu") ;;
		--restart) values="at-limit every= on-oom never" ;;
		--expect) values="no-leak" ;;
		--executor) values="local slurm" ;;
		--stop-signal) values="TERM INT HUP QUIT USR1 USR2" ;;
		--slurm-job) # the caller's running SLURM jobs (attach watches those on this node)
			values=$(squeue -h -t RUNNING -u "$(id -un)" -o %i 2>/dev/null) ;;
		esac
		[[ $values == *every=* ]] && compopt -o nospace 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur")
		return 0
	fi

	if [[ $cur == -* ]]; then
		local opts
		opts=$(_leakproof_options "$bin" "$cmd" | sed 's/[ [].*//' | sort -u)
		[[ $cmd == run ]] && opts+=$'\n--'
		mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
		return 0
	fi

	case $cmd in
	report) mapfile -t COMPREPLY < <(compgen -W "$(_leakproof_run_ids "$bin")" -- "$cur") ;;
	attach) # the pids of the caller's own processes, the ones it may watch
		mapfile -t COMPREPLY < <(compgen -W "$(ps -o pid= -u "$(id -u)" 2>/dev/null)" -- "$cur") ;;
	sweep)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -X '!*.yaml' -- "$cur"
			compgen -f -X '!*.yml' -- "$cur"
			compgen -d -- "$cur")
		;;
	esac
	return 0
}

complete -F _leakproof leakproof
