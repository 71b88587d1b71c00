"""FE: the calculix application (CalculiX's ccx in a GA over a bar, or a deck of your
own), its proxy fe_proxy, and what they share: the bar's model and deck, the GA and the
optimisation that runs it, the .frd output as ccx formats it."""
