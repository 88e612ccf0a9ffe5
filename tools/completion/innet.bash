# bash completion for innet (installed by `make install` into
# share/bash-completion/completions/innet): subcommands, their verbs and
# options, topology files (*.json) where a FILE goes, and the switches and
# hosts of a topology where a SWITCH or HOST goes (read with
# `innet fabric show FILE`: its "switch NAME ..." and "host NAME ..." lines).

_innet_nodes() { # FILE KIND (switch|host): the names of the topology's nodes
	local file=$1 kind=$2
	[ -r "$file" ] || return 0
	innet fabric show "$file" 2>/dev/null | awk -v k="$kind" '$1 == k { print $2 }'
}

_innet_topology_arg() { # the first *.json word after the subcommand
	local w
	for w in "${COMP_WORDS[@]:2}"; do
		case $w in *.json) printf '%s\n' "$w"; return ;; esac
	done
}

_innet() {
	local cur prev cmd verb
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	cmd=${COMP_WORDS[1]:-}
	verb=${COMP_WORDS[2]:-}
	local cmds="switch fabric ctl programs ping counter kv paxos dnn allreduce lb --help --version"
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
		return
	fi
	case $prev in
	--topology | --fabric | --out | --testset | --key-file | -s | --socket | --args-file)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--switch)
		COMPREPLY=($(compgen -W "$(_innet_nodes "$(_innet_topology_arg)" switch)" -- "$cur"))
		return
		;;
	--from | --to | --name)
		COMPREPLY=($(compgen -W "$(_innet_nodes "$(_innet_topology_arg)" host)" -- "$cur"))
		return
		;;
	--target)
		COMPREPLY=($(compgen -W "udp xdp" -- "$cur"))
		return
		;;
	esac
	local words="" files=0
	case $cmd in
	switch)
		words="--topology --name --port --program --args --workers --target --check --list-programs --help" ;;
	fabric)
		if [ "$COMP_CWORD" -eq 2 ]; then
			words="up down status show stop start restart --help"
		elif [ "$COMP_CWORD" -eq 3 ]; then
			files=1
		elif [ "$COMP_CWORD" -eq 4 ] && [[ $verb =~ ^(stop|start|restart)$ ]]; then
			words=$(_innet_nodes "${COMP_WORDS[3]}" switch)
		else
			words="--workers --foreground --timeout --machine --state --keep-logs --json --kill --set"
		fi ;;
	ctl)
		words="--socket --fabric --switch --json --timeout --help ping info programs help reg table group stats watch capture resources prog metrics" ;;
	kv)
		if [ "$COMP_CWORD" -eq 2 ]; then
			words="up down serve leader start stop rejoin remove add --help"
		elif [ "$COMP_CWORD" -eq 3 ] && [[ $verb =~ ^(up|down|start|stop|rejoin|remove|add)$ ]]; then
			files=1
		elif [ "$COMP_CWORD" -eq 4 ] && [[ $verb =~ ^(start|stop|remove|add)$ ]]; then
			words=$(_innet_nodes "${COMP_WORDS[3]}" host)
		elif [ "$COMP_CWORD" -eq 4 ] && [ "$verb" = rejoin ]; then
			words=$(_innet_nodes "${COMP_WORDS[3]}" switch)
		else
			words="--port --window --reads --proto-max-bulk-len --learner-filter --filter-mode --kill --keep-logs --topology --name --metrics"
		fi ;;
	paxos)
		if [ "$COMP_CWORD" -eq 2 ]; then words="acceptor leader bench --help"
		else words="--bind --id --learner --ring --acceptor --active --coordinator --topology --name --duration --outstanding --size --learner-filter --filter-mode"; fi ;;
	dnn)
		if [ "$COMP_CWORD" -eq 2 ]; then words="ref time compile infer eval --help"
		else words="--topology --from --testset --index --timeout --count --window --retries --out --pipes --max-vals --leaves --udp --slots --timeout-ms --multiply --ops-per-pass --quiet --rounds"; files=1; fi ;;
	lb)
		if [ "$COMP_CWORD" -eq 2 ]; then words="backend load agent keygen --help"
		else words="--help"; fi ;;
	ping)
		words="--topology --from --to -c --count --interval --help" ;;
	counter)
		words="inc read load --help" ;;
	allreduce)
		words="--help --topology --check --join --rejoin" ;;
	programs)
		words="--json --help" ;;
	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
	if [ "$files" = 1 ]; then
		COMPREPLY+=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
	fi
}
complete -F _innet innet
