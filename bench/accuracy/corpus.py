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

#: More prose of the same kinds, used only by the end-to-end measurement (``bench.accuracy.e2e``)
#: for
#: contexts longer than one passage: joined after ``PASSAGES`` it gives more than 2 x 2,113
#: SmolLM2 tokens (two windows of 2,048 context + 64 continuation + 1 tokens). The real-KV
#: capture (``bench.accuracy.realkv``) reads ``PASSAGES`` only, so its data do not change.
LONG_PASSAGES: tuple[str, ...] = (
    """The railway reached the valley in 1871, and within a decade the pattern of life there \
had changed more than in the previous three centuries. Farmers who had once driven their \
cattle for four days to the market in the county town now loaded them into wagons at the new \
station and were home by evening. Slate from the quarries above the village, which had been \
carried down the mountain on sledges and then by cart to the coast, went by train to the \
growing cities of the north, where it roofed long terraces of workers' houses. The station \
master, a man named Pritchard, kept a diary in which he recorded the weather, the number of \
passengers, and every quarrel between the porters. His entries for the winter of 1879 describe \
snow so deep that the morning train was dug out by forty men with shovels, and a wedding party \
that waited six hours on the platform rather than postpone the ceremony.

The quarries closed one by one in the twentieth century. Cheaper tiles made of concrete and \
clay replaced slate on new houses, and the deep workings became too expensive to drain. By \
1960 only a handful of men still split slate by hand, sitting in open-sided sheds with a \
mallet and a broad chisel, turning thick blocks into thin, even sheets with a skill that took \
years to learn. The railway closed in 1964. Its embankments are now a footpath, and the old \
station building is a tea room whose walls are hung with photographs of the porters, the \
quarrymen and the wedding party in the snow.

Bees communicate the location of food through a behaviour known as the waggle dance. A \
forager that has found a rich patch of flowers returns to the hive and walks in a figure of \
eight on the vertical surface of the comb, waggling her abdomen during the straight central \
run. The angle of that run relative to the vertical tells the other bees the direction of the \
food relative to the sun, and the length of the waggle phase tells them the distance. A run \
lasting about one second corresponds to a distance of roughly a kilometre, although the exact \
relationship differs between colonies and depends on the landscape the bees fly over. Because \
the sun moves across the sky during the day, a dancing bee adjusts the angle of her dance as \
the hours pass, even when she has been inside the dark hive for some time.

Researchers first decoded the dance in the 1940s by placing dishes of sugar water at known \
positions and watching the bees that returned from them. Later experiments used small robots \
that performed the dance on the comb, and showed that bees followed the directions of a \
machine as well as those of a sister. More recently, scientists have filmed thousands of \
dances and mapped where a colony forages through the seasons, which has helped farmers and \
conservationists understand which flowers matter most to bees in early spring and late \
summer, when food is scarce.

Dear Mr Hartley, thank you for your letter of the twelfth, and for the photographs of the \
damage to the ceiling in the back bedroom. I have spoken to the builder who repaired the roof \
last year, and he has agreed to inspect the property on Thursday morning between nine and \
eleven. If that time is not convenient, please let me know by Tuesday so that I can arrange \
another visit. I should explain that under the terms of your tenancy the landlord is \
responsible for the structure of the building, including the roof and the gutters, while the \
tenant is responsible for reporting any defect promptly and for taking reasonable steps to \
prevent further damage, such as placing a bucket under a leak. Nothing in your letter \
suggests that you have failed in that duty, and I do not expect the cost of the repair to be \
charged to you. I will write again once the builder has given me his report. Yours sincerely, \
Margaret Owen, on behalf of the Lakeside Lettings Agency.""",
    """Before you replace a bicycle chain, measure the old one. Lay a ruler along the chain so \
that the zero mark sits on the centre of one pin, and look at the pin twelve inches along. On \
a new chain it will sit exactly on the twelve-inch mark; if it sits an eighth of an inch \
beyond, the chain has stretched and will soon wear the teeth of the sprockets. To remove the \
chain, shift onto the smallest sprocket at the back, find the quick link, and squeeze its two \
plates together with a pair of link pliers until it opens. Count the links of the old chain, \
or lay the two chains side by side, and cut the new one to the same length with a chain tool, \
pushing the pin out carefully rather than all the way. Thread the new chain through the rear \
derailleur, join it with a new quick link, and pedal backwards while you shift through every \
gear to check that it runs smoothly.

The old observatory stands on a hill to the west of the city, surrounded by pine trees that \
were planted to shelter the telescopes from the wind. It was built in the 1880s, when the city \
was small and the sky above it was dark enough to see the faint band of the Milky Way on any \
clear night. The great refractor, with a lens nearly seventy centimetres across, was for a \
few years the largest in the world. Astronomers used it to measure the positions of double \
stars, to watch the moons of Jupiter, and to photograph the surface of the Moon on glass \
plates that are still kept in wooden cabinets in the basement. As the city grew, its lights \
washed out the sky, and by the middle of the twentieth century serious research had moved to \
mountain sites far away. Today the observatory is a museum, and on Friday evenings volunteers \
open the dome so that visitors can look through the old telescope at Saturn's rings.

"Are you sure this is the right road?" asked Tom, peering at the map on his knees. "I'm sure \
it was the right road an hour ago," said his sister, who was driving. "Whether it still is, \
I couldn't tell you." The lane had narrowed until the hedges brushed both sides of the car, \
and a strip of grass had appeared in the middle. They passed a farm with a barking dog, then \
a ford where the water came halfway up the wheels, then a signpost so faded that neither of \
them could read it. "We could turn back," said Tom. "There is nowhere to turn," said Anna, \
and she was right. Ten minutes later the lane ended in a farmyard, where an elderly man in a \
flat cap was mending a gate. He listened to their question, nodded slowly, and told them they \
were the third car that week to follow the same wrong turning from the main road.

Composting turns kitchen scraps and garden waste into a dark, crumbly material that improves \
almost any soil. The process depends on bacteria and fungi, which need air, moisture and a \
balance of two kinds of material. Green material, such as grass cuttings, vegetable peelings \
and coffee grounds, is rich in nitrogen; brown material, such as dry leaves, straw, shredded \
paper and cardboard, is rich in carbon. A heap made only of grass becomes slimy and smells, \
while a heap made only of leaves takes years to rot. Mix the two in roughly equal volumes, \
keep the heap as damp as a wrung-out sponge, and turn it with a fork every few weeks to let \
air in. In summer a well-made heap can become hot enough to steam on a cool morning, and the \
compost may be ready in three or four months; in winter the process slows almost to a stop.

The committee met on the first Monday of the month in the back room of the library. The \
minutes record that the meeting opened at seven o'clock with eleven members present and two \
apologies. The treasurer reported a balance of four hundred and twelve pounds, after the \
payment of the hall hire for the summer fair and the purchase of a new urn. The secretary \
read a letter from the council about the proposed closure of the footpath behind the school, \
and it was agreed that the chair would respond, objecting to the closure on behalf of the \
society. Under any other business, Mrs Patel proposed a guided walk along the canal in \
September, which was approved unanimously, and Mr Davies asked once again whether the \
society's collection of old postcards could be scanned and put on the internet. The chair \
said that a volunteer was needed. The meeting closed at half past eight.""",
)
