"""Plain English prose fed to the real model when capturing KV (no downloads).

Two passages of varied register (history, science, cooking, dialogue, instructions,
contract language, travel writing) so that the captured keys and values are those of
ordinary text rather than of one repeated pattern. Each passage tokenizes to more than
512 SmolLM2 tokens; the capture keeps the first 512.
"""

from __future__ import annotations

PASSAGES: tuple[str, ...] = (
    """The harbour town grew up around a single stone quay, built in the fourteenth century by \
merchants who traded wool for wine. For two hundred years the quay was the only place on that \
stretch of coast where a ship of any size could unload without waiting for the tide. The town \
records, which survive in a damp cellar beneath the guildhall, list cargoes of salt, timber, \
copper pans, barrels of herring and, on one occasion, a live bear destined for a nobleman's \
menagerie. When the river silted up in the 1620s the merchants moved north, and the town \
shrank to a fishing village of perhaps three hundred people.

Light travels through a vacuum at almost exactly 299,792 kilometres per second, but it slows \
down when it passes through glass or water. The ratio between the two speeds is called the \
refractive index. Because the index depends slightly on the wavelength, a prism bends violet \
light more than red light, and a beam of sunlight spreads into a band of colours. Isaac Newton \
showed in 1666 that a second prism could recombine the colours into white light, which \
convinced him that colour belongs to the light itself and is not added by the glass.

To make a simple loaf, mix 500 grams of strong white flour with 10 grams of salt and 7 grams \
of dried yeast. Add 350 millilitres of lukewarm water and stir until no dry flour remains. \
Knead the dough on a lightly floured surface for about ten minutes, until it feels smooth and \
springs back when pressed. Leave it covered in a warm place for an hour, then shape it, let \
it rise again for forty minutes, and bake at 220 degrees Celsius for thirty to thirty-five \
minutes. The loaf is done when it sounds hollow as you tap the base.

"Are you sure this is the right road?" asked Maria, peering at the map in the fading light.
"Positive," said Tom, though he did not sound positive at all. "The sign said the village \
was eight miles away, and we've driven at least seven."
"We passed that sign an hour ago."
"Then we must be very close." He slowed the car as the lane narrowed between two hedges, \
and for a while neither of them spoke. An owl crossed the beam of the headlights. At last \
a cluster of lights appeared in the valley below, and Maria laughed with relief.

The committee met on Tuesday to review the quarterly budget. Spending on maintenance was \
twelve percent above forecast, mainly because of emergency repairs to the roof of the east \
wing after the February storms. Income from room hire rose slightly, while grants fell by \
eight thousand pounds compared with the same period last year. The treasurer proposed \
postponing the purchase of new chairs until the autumn, and the motion was carried by five \
votes to two, with one abstention. The next meeting will take place on the fourth of June.

Honeybees communicate the location of food with a movement known as the waggle dance. A \
forager returning to the hive runs in a straight line across the vertical comb while \
shaking her abdomen, then loops back and repeats the run. The angle of the run relative to \
vertical matches the angle between the sun and the food source, and the length of the \
waggle phase indicates the distance. Other workers follow the dancer, pick up the scent of \
the flowers she has visited, and fly out to find them. A strong colony can exploit patches \
of flowers several kilometres away within hours of their discovery.

Winter in the mountains arrives without warning. One morning the larches are gold and the \
streams run clear; the next, the path is buried under a foot of snow and the only sound is \
the creak of branches bending under their load. Shepherds who have spent the summer on the \
high pastures bring their flocks down in long, noisy lines, and the cafes in the valley \
fill with people warming their hands around bowls of soup.""",
    """Before you install the software, check that your computer meets the minimum \
requirements: a 64-bit processor, eight gigabytes of memory, and at least twenty gigabytes \
of free disk space. Download the installer from the official website and verify its \
checksum against the value published on the release page. Run the installer with \
administrator rights, accept the licence agreement, and choose a destination folder. When \
the installation finishes, restart the computer before launching the program for the \
first time. If the program fails to start, consult the log file in the settings folder.

In the early nineteenth century, most long journeys in Britain were made by stagecoach. A \
coach carried four passengers inside and up to a dozen more on the roof, and it changed \
horses every ten or twelve miles at coaching inns along the route. The fastest mail coaches \
averaged about ten miles an hour, including stops, which meant that the journey from London \
to Edinburgh took around forty-five hours. Within twenty years of the opening of the first \
passenger railways, the stagecoach had almost disappeared from the main roads.

This agreement is made between the Landlord and the Tenant named in the schedule. The \
Tenant shall pay the rent monthly in advance on the first day of each month, by standing \
order to the account nominated by the Landlord. The Tenant shall keep the interior of the \
property in good and clean condition, shall not make any alteration without prior written \
consent, and shall permit the Landlord to enter on reasonable notice to inspect the state \
of repair. Either party may end the agreement by giving two months' notice in writing.

The cell is the basic unit of life. Every cell is surrounded by a membrane made of two \
layers of lipid molecules, with proteins embedded in it that act as channels, pumps and \
receptors. Inside, the cytoplasm contains ribosomes, which assemble proteins from amino \
acids following instructions copied from the DNA. In plants and animals the DNA is kept in \
a nucleus, and energy is released by mitochondria, small bodies with their own DNA that \
probably descend from bacteria swallowed by an ancestral cell more than a billion years ago.

My grandmother kept a notebook of everything she grew in her garden: the date each row \
of beans was sown, the first frost of every autumn, the year the plum tree produced so \
much fruit that a branch snapped. She wrote in pencil, in a small upright hand, and she \
never crossed anything out. When I read it now I can hear her voice, dry and a little \
impatient, telling me that potatoes should never be planted where tomatoes grew the year \
before, and that slugs are best collected by torchlight after rain.

The match was decided in the final minute. With the score level at two goals each, the \
visiting side won a corner on the left. The ball was swung into the crowded penalty area, \
struck the head of a defender, and dropped at the feet of the substitute striker, who had \
been on the pitch for barely five minutes. He turned and shot in a single movement, and \
the ball flew into the top corner before the goalkeeper could move. The small group of \
travelling supporters behind the goal erupted, and the home crowd fell silent.

A good map tells you more than the way from one place to another. Contour lines show how \
steeply the ground rises, so that you can see at a glance whether a path climbs gently \
along a valley or zigzags straight up a ridge. Symbols mark churches, springs, \
viewpoints and ruined castles, while the colour of a road shows whether it is a motorway \
or a track suitable only for tractors. Learning to read these details turns a walk into \
a conversation with the landscape.""",
)
